"""Scalar indices (BTREE, BITMAP) and the planner that lets scans use them.

The names of the singleton system indices live in `mvcc_core.naming` and the fragment reuse index in
`mvcc_core.frag_reuse`: transactions and conflict rules need them, and sit below this package.
"""

from mvcc_core.naming import FRAG_REUSE_INDEX, MEM_WAL_INDEX, SINGLETON_INDICES

__all__ = ["FRAG_REUSE_INDEX", "MEM_WAL_INDEX", "SINGLETON_INDICES"]
