"""How the `mvcc` command prints: JSON, rich tables and pairs, progress bars, sizes and durations."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import click

from mvcc_core.progress import Progress

#: The width of tables written to a pipe or a file: each line as long as its content.
UNBOUNDED_WIDTH = 1_000_000


#: Columns never wrapped (numbers and times): a narrow terminal folds the text columns.
_NO_WRAP = {"version", "time", "read", "operation", "rows", "tag"}


def json_default(value: Any) -> Any:
    """A JSON form of what `json.dumps` cannot write itself (its `default`).

    Args:
        value: a datetime (ISO text), bytes (hex), a set or tuple (a list), or anything else (its str)
    """
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def emit_json(value: Any) -> None:
    """Print `value` as indented JSON (datetimes as ISO text, bytes as hex, sets and tuples as lists).

    Args:
        value: what the command answers
    """
    click.echo(json.dumps(value, default=json_default, indent=2))


def _console(stderr: bool = False) -> Any:
    from rich.console import Console  # imported when drawn: `--json` and scripts never pay for it

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            """Raise the BrokenPipeError (rich would exit 1 itself): the command ends quietly with the exit
            code of a closed pipe (`EXIT_BROKEN_PIPE`), whatever printed."""
            self.quiet = True
            raise BrokenPipeError("stdout's reader is gone")

    console = PipeConsole(stderr=stderr, soft_wrap=False)
    if not console.is_terminal:
        # a pipe or a file has no width: rich would assume 80 columns and fold every longer line
        console = PipeConsole(stderr=stderr, soft_wrap=False, width=UNBOUNDED_WIDTH)
    return console


def print_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as a rich table.

    Args:
        title: the table's title (None: none)
        columns: the column headers
        rows: the rows, one value per column
    """
    from rich.table import Table as RichTable

    table = RichTable(title=title, title_justify="left")
    for name in columns:
        table.add_column(name, overflow="fold", no_wrap=name in _NO_WRAP)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    _console().print(table)


def print_pairs(pairs: Sequence[tuple[str, Any]]) -> None:
    """Print `key  value` lines, the values aligned.

    Args:
        pairs: (key, value) pairs in order; a None value prints empty
    """
    width = max(len(k) for k, _ in pairs)
    for key, value in pairs:
        click.echo(f"{key.ljust(width)}  {'' if value is None else value}")


@contextmanager
def progress_bar(description: str, enabled: bool = True) -> Iterator[Progress | None]:
    """A `progress(done, total)` drawing a rich bar on stderr when it is a terminal; None otherwise, so that a
    pipe or a scheduler's log gets only the summary.

    Args:
        description: what the bar says it is doing
        enabled: False: no bar whatever stderr is
    """
    console = _console(stderr=True)
    if not enabled or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
    ) as bar:
        task = bar.add_task(description, total=None)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield report


def plural(n: int, word: str) -> str:
    """`1 task`, `2 tasks`, `1,024 versions`: a count and its noun, the noun in the plural unless the count is 1.

    Args:
        n: the count
        word: the noun in the singular (the plural adds an s)
    """
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def human_bytes(n: int) -> str:
    """A byte count in binary units (`512 B`, `1.5 MiB`).

    Args:
        n: the number of bytes
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def format_duration(delta: timedelta) -> str:
    """A timedelta in `parse_duration`'s words: 7d, 1d12h, 90s, 0s.

    Args:
        delta: a non-negative duration
    """
    seconds = int(delta.total_seconds())
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def version_ranges(versions: Sequence[int]) -> str:
    """1,2,3,5 -> "1-3, 5".

    Args:
        versions: version numbers, in any order
    """
    out: list[str] = []
    for v in sorted(versions):
        if out and out[-1].split("-")[-1] == str(v - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{v}"
        else:
            out.append(str(v))
    return ", ".join(out)


def _coverage(index: dict[str, Any]) -> str:
    """ "covered/live" fragments (the MemWAL entry has no coverage)."""
    if "num_indexed_fragments" not in index:
        return ""
    covered = index["num_indexed_fragments"]
    return f"{covered}/{covered + index['num_unindexed_fragments']}"


def print_indices(indices: list[dict[str, Any]]) -> None:
    """Print the `index list` table.

    Args:
        indices: the indices as `index list --json` gives them
    """
    rows = [
        (
            i["name"],
            i["type"],
            ", ".join(i["fields"]),
            i.get("version", ""),
            _coverage(i),
        )
        for i in indices
    ]
    print_table("indices", ["name", "type", "columns", "built at", "fragments covered"], rows)
