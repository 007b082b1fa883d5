"""`lance.file`: pylance's Lance-file API has no mvcc_core counterpart (mvcc writes Parquet).

`stable_version` is the one exception: test_dataset.py calls it at import time, so it is bound to a function
returning pylance 14's value; the tests that use the value are about Lance's file format, out of scope by
tests/compat/pylance_suite.py's rules.
"""

from ._placeholders import module_getattr


def stable_version() -> str:
    """pylance 14.0.2's `lance.file.stable_version()` (a constant: the Lance file format version)."""
    return "2.2"


__getattr__ = module_getattr(__name__)
