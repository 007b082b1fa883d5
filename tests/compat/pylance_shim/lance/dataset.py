"""`lance.dataset`: pylance's names bound to mvcc_core's (see the package docstring)."""

import mvcc_core as _mvcc
from mvcc_core.ops.merge_insert import MergeInsertBuilder

from ._placeholders import module_getattr

write_dataset = _mvcc.write_table
LanceDataset = _mvcc.Table
Transaction = _mvcc.Transaction

__all__ = ["LanceDataset", "MergeInsertBuilder", "Transaction", "write_dataset"]

__getattr__ = module_getattr(__name__)
