"""Placeholders for pylance names that mvcc_core does not have (see the package docstring)."""

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable
from typing import Any, NoReturn


class _PlaceholderType(type):
    """The metaclass: attributes of a placeholder (`LanceOperation.Append`) are placeholders too."""

    def __getattr__(cls, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return placeholder(f"{cls.__qualname__}.{attribute}")


class Unavailable:
    """What calling a placeholder gives: every use of it raises NotImplementedError (module-level calls such as
    `EXPECTED = stable_version()` then fail only the tests that use the value)."""

    def __init__(self, qualified_name: str) -> None:
        object.__setattr__(self, "_name", qualified_name)

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            f"{object.__getattribute__(self, '_name')}: a pylance name with no mvcc_core counterpart"
        )

    def __getattr__(self, attribute: str) -> NoReturn:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        self._refuse()

    __call__ = __eq__ = __ne__ = __lt__ = __gt__ = __bool__ = __iter__ = __str__ = _refuse
    __hash__ = None  # type: ignore[assignment]


def placeholder(qualified_name: str) -> type:
    """A class standing for the pylance name `qualified_name`; its instances are `Unavailable`.

    Args:
        qualified_name: The pylance name, e.g. "lance.fragment.LanceFragment".

    Returns:
        A class that can be subclassed; calling it gives an `Unavailable`, whose every use raises.
    """

    def unavailable(cls: type, *args: Any, **kwargs: Any) -> Unavailable:
        return Unavailable(qualified_name)

    return _PlaceholderType(
        qualified_name.rsplit(".", 1)[-1], (), {"__new__": unavailable, "__qualname__": qualified_name}
    )


def module_getattr(module_name: str) -> Callable[[str], Any]:
    """A module-level `__getattr__` returning a placeholder for each name the module does not bind.

    Args:
        module_name: The module's dotted name.

    Returns:
        The function to assign to the module's `__getattr__`.
    """

    def getattr_(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(f"{module_name}.{name}")

    return getattr_


class _PlaceholderModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes `import lance.<anything>` succeed with a module of placeholders when no file provides it."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(self.package + "."):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = module_getattr(spec.name)  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install_finder(package: str) -> None:
    """Install the placeholder-module finder for `package`'s submodules (once).

    Args:
        package: The top-level package name ("lance").
    """
    if not any(isinstance(f, _PlaceholderModules) for f in sys.meta_path):
        sys.meta_path.append(_PlaceholderModules(package))
