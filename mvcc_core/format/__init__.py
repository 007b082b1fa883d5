"""The table format on storage: manifests, fragments, deletion vectors, bases, schema, row ids, tags, feature
flags, operations, file naming and the invariants a manifest must hold (docs/reference/format.md)."""
