"""A name-only stand-in for pylance's `lance` package, used by tests/compat/pylance_suite.py.

Each pylance name that has an mvcc_core counterpart is bound to it, and nothing else happens here: no
argument is renamed, converted or defaulted, so a test that passes through this module passes because
mvcc_core behaves as pylance does. A pylance name without a counterpart (and any submodule not listed
below) resolves to a placeholder that raises NotImplementedError when called or instantiated, so a test that
needs it fails instead of breaking the collection of its whole file.
"""

import mvcc_core as _mvcc
from mvcc_core.ops.merge_insert import MergeInsertBuilder

from . import commit as commit  # loaded before `dataset` is bound: the submodule must not replace it
from . import dataset as _dataset_module  # noqa: F401
from ._placeholders import install_finder, module_getattr

install_finder(__name__)

write_dataset = _mvcc.write_table
dataset = _mvcc.open_table
LanceDataset = _mvcc.Table
Transaction = _mvcc.Transaction

__all__ = ["LanceDataset", "MergeInsertBuilder", "Transaction", "dataset", "write_dataset"]

__getattr__ = module_getattr(__name__)
