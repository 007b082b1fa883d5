"""The IO manager: asset outputs written as table versions, inputs read at the version the run depends on.

- `manager`: `MvccIOManager` (docs/integrations/dagster/io_manager.md).
- `type_handlers`: how each Python type is written and read (`MvccTypeHandler`; pyarrow, pandas, polars, pyspark).
- `backfill`: backfills via restore, run by the IO manager before a backfill's first write
  (docs/integrations/dagster/backfills.md).
"""

from __future__ import annotations

from .._deprecated import forwarding_getattr
from .manager import MvccIOManager
from .type_handlers import (
    MvccTypeHandler,
    PandasTypeHandler,
    PolarsTypeHandler,
    PyArrowTypeHandler,
    SparkTypeHandler,
    default_type_handlers,
)

__all__ = [
    "MvccIOManager",
    "MvccTypeHandler",
    "PandasTypeHandler",
    "PolarsTypeHandler",
    "PyArrowTypeHandler",
    "SparkTypeHandler",
    "default_type_handlers",
]

# The names of the former module `mvcc_dagster.io_manager` (now `manager`), with a DeprecationWarning.
__getattr__ = forwarding_getattr(__name__, f"{__name__}.manager")
