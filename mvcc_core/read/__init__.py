"""Reading a version: filters (SQL translation, the bound filter, the reader of pyarrow Expressions), row-group
statistics, index lookups and the scan."""
