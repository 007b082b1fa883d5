"""Row-level operations that stage a transaction: delete, update, merge_insert, replace_where, schema
evolution, clone and index builds."""
