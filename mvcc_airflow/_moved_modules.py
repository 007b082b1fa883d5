"""Module paths of the previous release that now live in the provider's packages: each still imports, and warns.

The provider's modules were flat (`mvcc_airflow.conflicts`, `mvcc_airflow.branch_operators`, ...); they now sit
in Airflow's provider shape (`hooks/`, `operators/`, `sensors/`, `triggers/`, `assets/`, `utils/`). The old
names of `hooks`, `operators`, `sensors`, `triggers` and `assets` are the packages themselves. The others are
registered here as modules whose every attribute is the new module's, read with a `DeprecationWarning` that
names the new path. They go in the next release.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

# Old module name (under the package) -> its new module.
MOVED_MODULES: dict[str, str] = {
    "branch_operators": "operators.publish_branch",
    "compaction_calls": "utils.compaction_calls",
    "compaction_group": "operators.compaction_group",
    "conflicts": "utils.conflicts",
    "task_results": "utils.task_results",
    "versions": "utils.versions",
}


class MovedModule(ModuleType):
    """A module of the previous release: each attribute read warns and comes from `target`.

    Args:
        name: The old module's full name (``mvcc_airflow.conflicts``).
        target: The new module's full name (``mvcc_airflow.utils.conflicts``).
    """

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name, f"Deprecated: moved to {target}.")
        self.__spec__ = ModuleSpec(name, None)
        self._target = target

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr != "__all__":
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        warnings.warn(
            f"{self.__name__} is deprecated and goes in the next release: import from {self._target}",
            DeprecationWarning,
            stacklevel=2,
        )
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
        package: The package's name (``mvcc_airflow``).
    """
    for old, new in MOVED_MODULES.items():
        name = f"{package}.{old}"
        if name not in sys.modules:
            sys.modules[name] = MovedModule(name, f"{package}.{new}")
