"""Table maintenance: compaction, retention (cleanup) and restore helpers."""
