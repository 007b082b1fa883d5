"""Import paths of the previous release that moved when the plugin was laid out by concept: each still works, and
warns.

The plugin's modules were flat (`mvcc_dagster.sensors`, `mvcc_dagster.catalog_write_audit_publish`, ...); they
now sit in one subpackage per concept (`io_manager/`, `write_audit_publish/`, `health/`, `catalog/`,
`components/`, `maintenance/`). Three kinds of old path keep working for one more release, each read with a
`DeprecationWarning` that names the new path:

- a removed module (`MOVED_MODULES`) is registered in `sys.modules` as a `MovedModule` whose every attribute
  is the new module's;
- a module that became a package of the same name (`mvcc_dagster.health`, `.catalog`, `.io_manager`,
  `.write_audit_publish`) resolves the old module's names that its package does not export through
  `forwarding_getattr`, its module ``__getattr__``;
- a name the package root exported before it was narrowed resolves through the root's ``__getattr__``
  (`mvcc_dagster.MOVED`).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

# Old module name (under the package) -> its new module.
MOVED_MODULES: dict[str, str] = {
    "backfill": "io_manager.backfill",
    "catalog_maintenance": "maintenance.catalog",
    "catalog_write_audit_publish": "write_audit_publish.catalog",
    "component": "components.table_component",
    "publish_job": "write_audit_publish.publish_job",
    "sensors": "health.sensors",
    "step_identity": "catalog.step_identity",
}

_METADATA = "mvcc_dagster.metadata"


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and goes in the next release: import it from {new}", DeprecationWarning, stacklevel=3
    )


def _home(name: str, module: str) -> str:
    """Where to import `name` (found in `module`) from now: the metadata module for a metadata key, the module
    that defines a function or class, else `module`."""
    metadata = importlib.import_module(_METADATA)
    if name in metadata.__all__:
        return _METADATA
    defined_in = getattr(getattr(importlib.import_module(module), name, None), "__module__", None)
    return defined_in if isinstance(defined_in, str) and defined_in.startswith("mvcc_dagster.") else module


class MovedModule(ModuleType):
    """A module of the previous release: each attribute read warns and comes from `target`.

    Args:
        name: The old module's full name (``mvcc_dagster.sensors``).
        target: The new module's full name (``mvcc_dagster.health.sensors``).
    """

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name, f"Deprecated: moved to {target}.")
        self.__spec__ = ModuleSpec(name, None)
        self._target = target

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr != "__all__":
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        _warn(f"{self.__name__}.{attr}" if attr != "__all__" else self.__name__, _home(attr, self._target))
        module = importlib.import_module(self._target)
        if attr == "__all__":
            return list(getattr(module, "__all__", None) or _defined_names(module))
        return getattr(module, attr)

    def __dir__(self) -> list[str]:
        return sorted(dir(importlib.import_module(self._target)))


def _defined_names(module: ModuleType) -> list[str]:
    """The public names `module` defines itself (not those it imports), for a star import of its old path."""
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and getattr(value, "__module__", module.__name__) == module.__name__
    ]


def register(package: str) -> None:
    """Put every moved module of `package` into `sys.modules`, so that its old import path still resolves.

    Args:
        package: The package's name (``mvcc_dagster``).
    """
    for old, new in MOVED_MODULES.items():
        name = f"{package}.{old}"
        if name not in sys.modules:
            sys.modules[name] = MovedModule(name, f"{package}.{new}")


def forwarding_getattr(package: str, old_module: str) -> Callable[[str], Any]:
    """A package's module ``__getattr__``: a name of the module the package replaced, read from `old_module`
    (its file now), with a DeprecationWarning naming where to import it from.

    Args:
        package: The package's full name (``mvcc_dagster.health``), which was the old module's.
        old_module: The module the old module's code is in now (``mvcc_dagster.health.checks``).

    Returns:
        The ``__getattr__`` function.
    """

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            module = importlib.import_module(old_module)
            if name in vars(module):
                _warn(f"{package}.{name}", _home(name, old_module))
                return vars(module)[name]
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def moved_names_getattr(package: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """The package root's ``__getattr__``: a name it exported before, from its module now, with a warning.

    Args:
        package: The package's name (``mvcc_dagster``).
        moved: Each old name and the module it is imported from now.

    Returns:
        The ``__getattr__`` function.
    """

    def __getattr__(name: str) -> Any:
        target = moved.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        _warn(f"{package}.{name}", target)
        return getattr(importlib.import_module(target), name)

    return __getattr__
