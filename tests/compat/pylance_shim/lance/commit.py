"""`lance.commit`: pylance's names bound to mvcc_core's (see the package docstring)."""

from mvcc_core import CommitConflictError

from ._placeholders import module_getattr

__all__ = ["CommitConflictError"]

__getattr__ = module_getattr(__name__)
