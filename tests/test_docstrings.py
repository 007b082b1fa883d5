"""Every public function and method of `mvcc_core` that takes parameters documents each of them.

The rule (CONTRIBUTING.md, "Docstrings"): a Google-style docstring whose `Args:` section names every parameter
of the signature and no other. "Public" is a name without a leading underscore, in a module or package without
one (so `mvcc_core/_proto`, generated code, is out); a public class's public methods count, and so does its
`__init__`, whose parameters are documented in the class docstring's `Args:` section (never in `__init__`'s own
docstring, so that the class's page says how to make one). A `self` or `cls` first parameter is not
documented; `*args` and `**kwargs` may be written with or without their stars.

Exempt, for the reason given:
- click commands and groups (a function decorated with `@<group>.command(...)`, `@click.command(...)` or
  `@click.group(...)`): their options' `help=` texts are their documentation, shown by `--help` (checked
  below for every `click.option`);
- `@typing.overload` signatures: the implementation's docstring documents the parameters.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "mvcc_core"

# The packages and top-level modules of mvcc_core the rule covers.
COVERED = ("table", "txn", "read", "catalog", "maintenance", "io", "format", "ops", "spark", "cli", "*.py")

_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:")


@dataclass(frozen=True)
class Documented:
    """One public callable: where it is, the parameters it takes, and its docstring."""

    where: str
    parameters: tuple[str, ...]
    docstring: str | None


def _public_modules() -> Iterator[Path]:
    for pattern in COVERED:
        paths = sorted(ROOT.glob(pattern)) if pattern.endswith(".py") else sorted((ROOT / pattern).rglob("*.py"))
        for path in paths:
            parts = path.relative_to(ROOT).parts
            if any(part.startswith("_") and part != "__init__.py" for part in parts):
                continue
            yield path


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target)


def _exempt(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    names = [_decorator_name(d) for d in function.decorator_list]
    return any(name.endswith((".command", ".group")) or name in ("overload", "typing.overload") for name in names)


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> tuple[str, ...]:
    arguments = function.args
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    static = any(_decorator_name(d) == "staticmethod" for d in function.decorator_list)
    if method and not static and positional and positional[0] in ("self", "cls"):
        positional = positional[1:]
    names = [*positional]
    if arguments.vararg is not None:
        names.append("*" + arguments.vararg.arg)
    names.extend(a.arg for a in arguments.kwonlyargs)
    if arguments.kwarg is not None:
        names.append("**" + arguments.kwarg.arg)
    return tuple(names)


def _callables_in(path: Path) -> Iterator[Documented]:
    tree = ast.parse(path.read_text(), filename=str(path))
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") and not _exempt(node):
                yield Documented(f"{module}.{node.name}", _parameters(node, False), ast.get_docstring(node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _methods_of(node, f"{module}.{node.name}")


def _methods_of(cls: ast.ClassDef, where: str) -> Iterator[Documented]:
    for node in cls.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _methods_of(node, f"{where}.{node.name}")
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _exempt(node):
            continue
        if node.name == "__init__":
            yield Documented(f"{where} (its __init__)", _parameters(node, True), ast.get_docstring(cls))
            yield Documented(f"{where}.__init__", (), ast.get_docstring(node))
        elif not node.name.startswith("_"):
            yield Documented(f"{where}.{node.name}", _parameters(node, True), ast.get_docstring(node))


def documented_arguments(docstring: str) -> list[str] | None:
    """The parameter names a Google-style docstring's `Args:` section lists, in order.

    Args:
        docstring: A cleaned docstring (`ast.get_docstring`), its lines dedented.

    Returns:
        The names as written (`*args` keeps its star), or None when there is no `Args:` section.
    """
    lines = docstring.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return None
    header_indent = len(lines[start]) - len(lines[start].lstrip())
    names: list[str] = []
    entry_indent: int | None = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent <= header_indent:
            break
        if entry_indent is None:
            entry_indent = indent
        if indent == entry_indent:
            match = _ENTRY.match(line.strip())
            if match is not None:
                names.append(match.group(1))
    return names


def problem(item: Documented) -> str | None:
    """What is wrong with one callable's documentation of its parameters, or None when nothing is.

    Args:
        item: The callable, its parameters and its docstring.

    Returns:
        A sentence naming the callable and the missing or unknown parameters, or None.
    """
    if not item.parameters:
        if item.docstring is not None and documented_arguments(item.docstring) is not None:
            return f"{item.where}: an Args: section where no parameters are taken (a class documents its __init__'s)"
        return None
    if item.docstring is None:
        return f"{item.where}: no docstring; it takes {', '.join(item.parameters)}"
    listed = documented_arguments(item.docstring)
    if listed is None:
        return f"{item.where}: no Args: section; it takes {', '.join(item.parameters)}"
    bare = {name.lstrip("*") for name in listed}
    missing = [p for p in item.parameters if p.lstrip("*") not in bare]
    expected = {p.lstrip("*") for p in item.parameters}
    unknown = [name for name in listed if name.lstrip("*") not in expected]
    if not missing and not unknown:
        return None
    said = []
    if missing:
        said.append(f"Args: misses {', '.join(missing)}")
    if unknown:
        said.append(f"Args: names {', '.join(unknown)}, which it does not take")
    return f"{item.where}: {'; '.join(said)}"


def all_public() -> list[Documented]:
    """Every public function and method in the covered parts of `mvcc_core`."""
    return [item for path in _public_modules() for item in _callables_in(path)]


def test_the_walk_finds_the_public_surface():
    items = all_public()
    wheres = {item.where for item in items}
    assert len(items) > 300
    assert "mvcc_core.table.handle.Table.merge_insert" in wheres
    assert "mvcc_core.table.handle.Table (its __init__)" in wheres
    assert "mvcc_core.table.handle.Table._txn" not in wheres
    assert "mvcc_core.cli.commands.describe" in wheres
    assert "mvcc_core.cli.commands.show" not in wheres  # a click command
    assert not any(where.startswith("mvcc_core._proto") for where in wheres)


def test_the_args_parser_reads_a_google_section():
    docstring = (
        "Summary.\n\nArgs:\n    first: One\n        continued: not an entry.\n"
        "    *rest (int): More.\n    **extra: Others.\n\nReturns:\n    x: not an argument.\n"
    )
    assert documented_arguments(docstring) == ["first", "*rest", "**extra"]
    assert documented_arguments("Summary only.") is None


def test_a_missing_or_unknown_parameter_is_named():
    item = Documented("m.f", ("a", "b"), "Summary.\n\nArgs:\n    a: One.\n    c: Gone.\n")
    assert problem(item) == "m.f: Args: misses b; Args: names c, which it does not take"
    assert problem(Documented("m.g", ("a",), "Summary.")) == "m.g: no Args: section; it takes a"
    assert problem(Documented("m.h", (), None)) is None
    assert "no parameters" in problem(Documented("m.C.__init__", (), "Summary.\n\nArgs:\n    a: One.\n"))


def test_every_click_option_has_help():
    """The exemption of click commands holds only while each of their options says what it is."""
    missing = []
    for path in sorted((ROOT / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            is_option = isinstance(node, ast.Call) and ast.unparse(node.func) == "click.option"
            if is_option and not any(keyword.arg == "help" for keyword in node.keywords):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node.args[0])}")
    assert not missing, "click options without help=:\n" + "\n".join(missing)


@pytest.mark.parametrize("part", COVERED)
def test_every_public_callable_documents_its_parameters(part):
    pattern = part if part.endswith(".py") else f"{part}/"
    problems = [
        found
        for path in _public_modules()
        if (str(path.relative_to(ROOT)).startswith(pattern) if pattern.endswith("/") else path.parent == ROOT)
        for item in _callables_in(path)
        if (found := problem(item)) is not None
    ]
    assert not problems, f"{len(problems)} undocumented parameters:\n" + "\n".join(problems)
