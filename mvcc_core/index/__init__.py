"""Scalar indices (BTREE, BITMAP), the planner that lets scans use them, and the fragment reuse index."""

# Singleton indices: at most one per table, merged (rebased) when two transactions write one.
FRAG_REUSE_INDEX = "__lance_frag_reuse"
MEM_WAL_INDEX = "__lance_mem_wal"
SINGLETON_INDICES = frozenset({FRAG_REUSE_INDEX, MEM_WAL_INDEX})
