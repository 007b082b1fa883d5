"""`plan_fleet` and `run_fleet`: one maintenance plan over many tables on one budget, and its execution.

The plan reads each table's advice (`recommend`: its manifest and one listing of its versions, no data file), on a
bounded thread pool when a table is on an object store, so the tables' round trips overlap. Every table with advice
gets a benefit (the sum of its advice scores) and a cost (the bytes its compaction would read, plus
`run_cost_bytes` for the fixed cost of any run), and the tables are ranked by benefit per byte of cost, highest
first (Amoro's ranking of tables by what an optimization gains against what it costs). The byte budget is then
filled greedily in that order: a table whose bytes do not fit what is left is skipped and a cheaper one after it
may still fit; while nothing is spent, a table bigger than the whole budget is taken with the budget as its share
(a partial compaction: its groups with the most benefit per byte first, the rest next time), so something is always
chosen when anything is advised. What is left says why, in words: over the byte budget, over the table limit,
outside the quiet hours, nothing advised, or missing / unreadable (a broken table is reported, the other tables are
planned).

`run_fleet` runs the chosen tables one by one (or on a few threads): compaction under the table's policy with the
byte share the plan gave it as `max_bytes`, then index optimization, then retention under the table's policy,
each only when advised. A failing table or step is reported in its result; the others go on. Rules and the
choices beside Amoro, predictive optimization and S3 Tables: docs/operations/maintenance.md, "A fleet on one
budget".
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from mvcc_core.errors import TableNotFoundError
from mvcc_core.maintenance import policy
from mvcc_core.maintenance.advice import MaintenanceAdvice, recommend
from mvcc_core.maintenance.cleanup import CleanupStats, cleanup_old_versions
from mvcc_core.maintenance.compaction import CompactionMetrics
from mvcc_core.maintenance.handles import state_of
from mvcc_core.maintenance.optimize import Optimize
from mvcc_core.txn.state import TableState

if TYPE_CHECKING:
    import pendulum

__all__ = [
    "DEFAULT_RUN_COST_BYTES",
    "FleetEntry",
    "FleetError",
    "FleetPlan",
    "FleetRun",
    "FleetTableResult",
    "LeftReason",
    "MaintainedTable",
    "QuietHours",
    "plan_fleet",
    "run_fleet",
]

log = logging.getLogger("mvcc.maintenance")

#: The fixed cost of one table's maintenance run, in bytes of rewrite it is worth: about 0.3 s of CPU (what an
#: orchestrator run costs whatever it does) at the measured 24 CPU-hours per TB rewritten is about 4 MiB. It keeps
#: a table with nothing to rewrite (retention, an index) from ranking infinitely high, and makes a tiny
#: compaction pay for its run.
DEFAULT_RUN_COST_BYTES = 4 * 2**20
#: Threads that read the tables' advice at once when a table is on an object store. On a local disk or in memory
#: the default is one: there the work is Python decoding manifests, and threads made a plan of 200 tables about
#: twice as slow on a quiet 2-core machine (docs/benchmarks/results.md, "Fleet planning").
DEFAULT_PLAN_WORKERS = 8
_LOCAL_SCHEMES = ("file://", "memory://")

LeftReason = Literal["over_budget", "over_table_limit", "outside_window", "nothing_advised", "missing", "unreadable"]
_COMPACTION_KINDS = ("compact", "materialize_deletions")
_CLOCK = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*$")


class MaintainedTable(Protocol):
    """What `run_fleet` calls on a table: a `Table` handle's maintenance methods."""

    @property
    def optimize(self) -> Any:
        """`t.optimize` (`compact_files`, `optimize_indices`)."""
        ...

    def cleanup_old_versions(self) -> CleanupStats:
        """Retention under the table's policy."""
        ...


class _StateTable:
    """A table given as a URI or a `TableState`, with a `Table`'s maintenance methods (maintenance sits below the
    `Table` facade and cannot build one); each commit moves it, as it moves a `Table`."""

    def __init__(self, state: TableState) -> None:
        self.state = state

    def _advance(self, state: TableState) -> None:
        self.state = state

    @property
    def optimize(self) -> Optimize:
        return Optimize(self.state, self._advance)

    def cleanup_old_versions(self) -> CleanupStats:
        stats = cleanup_old_versions(self.state)
        self.state.committer.forget_manifests()
        return stats


# ---- quiet hours ---------------------------------------------------------------------------------------


def _clock(text: str, what: str) -> tuple[int, int]:
    match = _CLOCK.match(text) if isinstance(text, str) else None
    if match is None or int(match.group(1)) > 23 or int(match.group(2)) > 59:
        raise ValueError(f"quiet hours {what} {text!r} is not a time of day: use HH:MM on a 24-hour clock, e.g. 22:00")
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class QuietHours:
    """A daily window of local wall-clock time in which maintenance may start, e.g. 22:00 to 06:00 in
    Europe/Amsterdam. An end before the start runs past midnight. On a night the clocks change the window is an
    hour longer or shorter (it is wall-clock time); a start or end the change skips moves forward by the gap, and
    one that happens twice is its later occurrence (pendulum's rules).

    Attributes:
        start: When the window opens, HH:MM.
        end: When it closes, HH:MM (not equal to `start`).
        zone: The IANA time zone of both (default UTC).
    """

    start: str
    end: str
    zone: str = "UTC"

    def __post_init__(self) -> None:
        import pendulum  # here only: a plan without quiet hours does not pay for its import

        if _clock(self.start, "start") == _clock(self.end, "end"):
            raise ValueError(f"quiet hours from {self.start} to {self.end} are empty: give an end unlike the start")
        try:
            pendulum.timezone(self.zone)
        except (ValueError, TypeError):  # pendulum's InvalidTimezone is a ValueError
            raise ValueError(
                f"quiet hours zone {self.zone!r} is not a time zone: use an IANA name such as Europe/Amsterdam or UTC"
            ) from None

    def __str__(self) -> str:
        return f"{self.start}-{self.end} {self.zone}"

    def _at(self, day: pendulum.Date, clock: str) -> pendulum.DateTime:
        import pendulum

        hour, minute = _clock(clock, "time")
        return pendulum.datetime(day.year, day.month, day.day, hour, minute, tz=self.zone)

    def _local(self, now: datetime) -> pendulum.DateTime:
        import pendulum

        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError(f"now={now!r} has no time zone: give an aware datetime, e.g. datetime.now(UTC)")
        return pendulum.instance(now).in_timezone(self.zone)

    def window_at(self, now: datetime) -> tuple[datetime, datetime] | None:
        """The window (opens, closes) that `now` is in, in the zone; None outside the quiet hours.

        Args:
            now: an aware datetime
        """
        local = self._local(now)
        crosses = _clock(self.end, "end") <= _clock(self.start, "start")
        for back in (1, 0):
            day = local.date().subtract(days=back)
            opens = self._at(day, self.start)
            closes = self._at(day.add(days=1) if crosses else day, self.end)
            if opens <= local < closes:
                return opens, closes
        return None

    def next_opening(self, now: datetime) -> datetime:
        """When the window next opens after `now` (in the zone).

        Args:
            now: an aware datetime
        """
        local = self._local(now)
        for ahead in (0, 1, 2):
            opens = self._at(local.date().add(days=ahead), self.start)
            if opens > local:
                return opens
        raise AssertionError("a daily window opens within two days")  # pragma: no cover

    def contains(self, now: datetime) -> bool:
        """Whether `now` is in the quiet hours.

        Args:
            now: an aware datetime
        """
        return self.window_at(now) is not None


def _in_words(span: timedelta) -> str:
    import pendulum

    return pendulum.duration(seconds=max(int(span.total_seconds()) // 60 * 60, 60)).in_words()


# ---- the plan ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetEntry:
    """One table of a fleet plan: chosen (`reason` None) or left, with its advice and figures.

    Attributes:
        name: The table's name in the mapping given to `plan_fleet`.
        uri: Its location ("" when it could not be opened and was not given as a URI).
        reason: Why it was left (None: chosen): over_budget, over_table_limit, outside_window, nothing_advised,
            missing or unreadable.
        detail: In words: why chosen or left, with the figures.
        version: The version advised on (None when it could not be read).
        advice: Its advice, best first (empty when nothing is advised or it could not be read).
        benefit: The sum of its advice scores.
        bytes_to_rewrite: On-disk bytes its compaction would read (at most the table's own `max_bytes` policy).
        priority: Benefit per MiB of cost (bytes to rewrite plus the run's fixed cost): the ranking key.
        rank: Its place among the tables with advice, from 1 (None without advice).
        byte_share: For a chosen table, the bytes its compaction may read (`max_bytes` of the run; None: no
            bound beyond the table's policy).
    """

    name: str
    uri: str
    reason: LeftReason | None
    detail: str
    version: int | None = None
    advice: tuple[MaintenanceAdvice, ...] = ()
    benefit: float = 0.0
    bytes_to_rewrite: int = 0
    priority: float = 0.0
    rank: int | None = None
    byte_share: int | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds of its advice, best first."""
        return tuple(a.kind for a in self.advice)

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON-ready values (advice as dicts)."""
        out = dataclasses.asdict(self)
        out["advice"] = [dataclasses.asdict(a) for a in self.advice]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FleetEntry:
        """The entry `to_dict` gave (e.g. back from XCom).

        Args:
            data: what `to_dict` returned
        """
        fields = dict(data)
        fields["advice"] = tuple(MaintenanceAdvice(**a) for a in fields.get("advice", ()))
        return cls(**fields)


@dataclass(frozen=True)
class FleetPlan:
    """What one planning pass over a fleet chose and left (`plan_fleet`).

    Attributes:
        planned_at: The time the plan was made for (`now`).
        chosen: The tables to maintain, in rank order.
        left: The others: first those with advice, in rank order, then the rest by name.
        max_bytes: The byte budget (None: none).
        max_tables: The most tables (None: no limit).
        window: The quiet hours, as "HH:MM-HH:MM zone" (None: always).
        window_closes: When the current window closes (None: no window, or outside it).
        next_window: When the window next opens (None: no window, or inside it).
        seconds: Wall time of the planning (not compared: two plans that chose alike are equal).
    """

    planned_at: datetime
    chosen: tuple[FleetEntry, ...]
    left: tuple[FleetEntry, ...]
    max_bytes: int | None = None
    max_tables: int | None = None
    window: str | None = None
    window_closes: datetime | None = None
    next_window: datetime | None = None
    seconds: float = dataclasses.field(default=0.0, compare=False)
    _sources: Mapping[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def chosen_bytes(self) -> int:
        """The bytes the chosen compactions may read (their shares)."""
        return sum(e.byte_share if e.byte_share is not None else e.bytes_to_rewrite for e in self.chosen)

    @property
    def carried_bytes(self) -> int:
        """The bytes of the advised tables left for a later plan."""
        return sum(e.bytes_to_rewrite for e in self.left if e.advice)

    def entry(self, name: str) -> FleetEntry:
        """The entry of one table, chosen or left.

        Args:
            name: the table's name in the plan

        Raises:
            KeyError: the plan has no table of that name
        """
        for e in (*self.chosen, *self.left):
            if e.name == name:
                return e
        raise KeyError(f"the fleet plan has no table {name!r}")

    def summary(self) -> str:
        """One line in words: what was chosen, what was left and why (a schedule tick's reason)."""
        why: dict[str, int] = {}
        for e in self.left:
            assert e.reason is not None
            why[e.reason] = why.get(e.reason, 0) + 1
        left = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in sorted(why.items()))
        return (
            f"{len(self.chosen)} of {len(self.chosen) + len(self.left)} tables chosen "
            f"({self.chosen_bytes:,} bytes to rewrite"
            + (f" of a budget of {self.max_bytes:,}" if self.max_bytes is not None else "")
            + ")"
            + (f"; left: {left}" if left else "")
        )

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready values (times as ISO 8601 strings): orchestrator metadata, an XCom value."""
        return {
            "planned_at": self.planned_at.isoformat(),
            "chosen": [e.to_dict() for e in self.chosen],
            "left": [e.to_dict() for e in self.left],
            "max_bytes": self.max_bytes,
            "max_tables": self.max_tables,
            "window": self.window,
            "window_closes": None if self.window_closes is None else self.window_closes.isoformat(),
            "next_window": None if self.next_window is None else self.next_window.isoformat(),
            "seconds": self.seconds,
            "chosen_bytes": self.chosen_bytes,
            "carried_bytes": self.carried_bytes,
            "summary": self.summary(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FleetPlan:
        """The plan `to_dict` gave; `run_fleet` then opens the chosen tables by their URIs.

        Args:
            data: what `to_dict` returned
        """

        def when(text: str | None) -> datetime | None:
            return None if text is None else datetime.fromisoformat(text)

        planned = when(data["planned_at"])
        assert planned is not None
        return cls(
            planned_at=planned,
            chosen=tuple(FleetEntry.from_dict(e) for e in data["chosen"]),
            left=tuple(FleetEntry.from_dict(e) for e in data["left"]),
            max_bytes=data.get("max_bytes"),
            max_tables=data.get("max_tables"),
            window=data.get("window"),
            window_closes=when(data.get("window_closes")),
            next_window=when(data.get("next_window")),
            seconds=data.get("seconds", 0.0),
        )


def _positive(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return policy.parse_size(value) if what == "max_bytes" else int(value)
        except ValueError as exc:
            raise ValueError(f"{what}={value!r} is not valid: {exc}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int (or None for no limit), got {value!r}")
    return value


def _is_handle(value: object) -> bool:
    return hasattr(value, "optimize") and hasattr(value, "cleanup_old_versions") and hasattr(value, "state")


def _check_sources(tables: Mapping[str, Any]) -> None:
    if not isinstance(tables, Mapping):
        raise TypeError(f"tables must be a mapping of names to tables or URIs, got {type(tables).__name__}")
    for name, value in tables.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"a fleet's table names are non-empty strings, got {name!r}")
        if not (isinstance(value, str | TableState) or _is_handle(value)):
            raise TypeError(f"table {name!r} is a {type(value).__name__}: give a Table, a TableState or a URI")


def _uri_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    return str(state_of(value).uri)


def _default_workers(tables: Mapping[str, Any]) -> int:
    """DEFAULT_PLAN_WORKERS when some table is on an object store (its URI has a scheme other than file:// and
    memory://), else 1."""
    for value in tables.values():
        uri = _uri_of(value)
        if "://" in uri and not uri.startswith(_LOCAL_SCHEMES):
            return DEFAULT_PLAN_WORKERS
    return 1


def _advise(name: str, source: Any, now: datetime, storage_options: dict[str, Any] | None, run_cost: int) -> FleetEntry:
    """One table's advice, benefit and cost; a missing or unreadable table as a left entry."""
    uri = source if isinstance(source, str) else ""
    try:
        uri = _uri_of(source)
        state = TableState.open(source, storage_options=storage_options) if isinstance(source, str) else source
        state = state_of(state)
        advice = tuple(recommend(state, now=now))
        version = state.version
        own_budget = policy.compaction_options(state.manifest.config).max_bytes if advice else None
    except TableNotFoundError as exc:
        return FleetEntry(name, uri, "missing", f"no table: {exc}")
    except Exception as exc:  # noqa: BLE001 - one broken table must not stop the fleet's plan
        log.warning("fleet plan: table %s (%s) could not be read: %s", name, uri, exc)
        return FleetEntry(name, uri, "unreadable", f"could not be read: {type(exc).__name__}: {exc}")
    if not advice:
        return FleetEntry(name, uri, "nothing_advised", "nothing to do: no maintenance would pay", version)
    rewrite = sum(a.bytes_to_rewrite for a in advice if a.kind in _COMPACTION_KINDS)
    if own_budget is not None:
        rewrite = min(rewrite, own_budget)
    benefit = sum(a.score for a in advice)
    priority = benefit / ((rewrite + run_cost) / 2**20)
    return FleetEntry(name, uri, None, "", version, advice, benefit, rewrite, priority)


def _choose(
    ranked: list[FleetEntry], max_bytes: int | None, max_tables: int | None, closed: str | None
) -> tuple[list[FleetEntry], list[FleetEntry]]:
    """The greedy fill of the budget in rank order: (chosen, left)."""
    chosen: list[FleetEntry] = []
    left: list[FleetEntry] = []
    spent = 0
    for entry in ranked:
        what = f"rank {entry.rank}, benefit {entry.benefit:.3f}, {entry.bytes_to_rewrite:,} bytes to rewrite"
        if closed is not None:
            left.append(dataclasses.replace(entry, reason="outside_window", detail=f"{what}; {closed}"))
        elif max_tables is not None and len(chosen) >= max_tables:
            left.append(
                dataclasses.replace(
                    entry, reason="over_table_limit", detail=f"{what}; the limit of {max_tables} tables is reached"
                )
            )
        elif max_bytes is None:
            chosen.append(dataclasses.replace(entry, detail=what, byte_share=entry.bytes_to_rewrite or None))
        elif spent == 0 and entry.bytes_to_rewrite > max_bytes:
            chosen.append(
                dataclasses.replace(
                    entry,
                    detail=f"{what}; the first compaction gets the whole budget of {max_bytes:,} bytes (a "
                    "partial compaction, the rest next time)",
                    byte_share=max_bytes,
                )
            )
            spent = max_bytes
        elif spent + entry.bytes_to_rewrite <= max_bytes:
            spent += entry.bytes_to_rewrite
            chosen.append(dataclasses.replace(entry, detail=what, byte_share=entry.bytes_to_rewrite or None))
        else:
            left.append(
                dataclasses.replace(
                    entry,
                    reason="over_budget",
                    detail=f"{what}; {max_bytes - spent:,} of the budget of {max_bytes:,} bytes are left",
                )
            )
    return chosen, left


def plan_fleet(
    tables: Mapping[str, Any],
    *,
    max_bytes: int | str | None = None,
    max_tables: int | None = None,
    window: QuietHours | None = None,
    now: datetime | None = None,
    storage_options: dict[str, Any] | None = None,
    max_workers: int | None = None,
    run_cost_bytes: int = DEFAULT_RUN_COST_BYTES,
) -> FleetPlan:
    """One maintenance plan over many tables: each table's advice, ranked by benefit per byte, the byte budget
    filled greedily (at least one table when anything is advised), and what is left with the reason.

    Reads each table's manifest and one listing of its versions, on up to `max_workers` threads; no data file.
    A table that is missing or cannot be read is a left entry with the error, never an exception.

    Args:
        tables: names to tables: a `Table`, a `TableState` or a URI (opened with `storage_options`)
        max_bytes: the most on-disk bytes the chosen compactions read together (an int or a size such as
            "10GiB"; None: no budget)
        max_tables: the most tables chosen (None: no limit)
        window: quiet hours: outside them nothing is chosen and every advised table is left as outside_window
            (None: always open)
        now: the time retention ages and the window are measured at (an aware datetime; default: now, UTC)
        storage_options: the store's options for the tables given as URIs
        max_workers: threads reading advice at once (1: one table after another; None: 8 when a table is on an
            object store, else 1)
        run_cost_bytes: the fixed cost of one table's run in bytes of rewrite, added to each table's bytes in
            the ranking (default 4 MiB, about 0.3 s of CPU)

    Raises:
        TypeError: `tables` is not a mapping of names to tables or URIs
        ValueError: a budget, limit, worker count or `now` that is not valid
    """
    started = time.perf_counter()
    _check_sources(tables)
    budget = _positive(max_bytes, "max_bytes")
    limit = _positive(max_tables, "max_tables")
    workers = _positive(max_workers, "max_workers") or _default_workers(tables)
    if isinstance(run_cost_bytes, bool) or not isinstance(run_cost_bytes, int) or run_cost_bytes < 1:
        raise ValueError(f"run_cost_bytes must be a positive int, got {run_cost_bytes!r}")
    now = datetime.now(UTC) if now is None else now
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now={now!r} has no time zone: give an aware datetime, e.g. datetime.now(UTC)")
    closed: str | None = None
    closes = opens = None
    if window is not None:
        current = window.window_at(now)
        if current is None:
            opens = window.next_opening(now)
            closed = f"outside the quiet hours {window}: they open at {opens.isoformat()}, in {_in_words(opens - now)}"
        else:
            closes = current[1]

    def one(item: tuple[str, Any]) -> FleetEntry:
        return _advise(item[0], item[1], now, storage_options, run_cost_bytes)

    items = list(tables.items())
    if workers == 1 or len(items) <= 1:
        entries = [one(item) for item in items]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="mvcc-fleet") as pool:
            entries = list(pool.map(one, items))
    advised = [e for e in entries if e.reason is None]
    advised.sort(key=lambda e: (-e.priority, -e.benefit, e.name))
    ranked = [dataclasses.replace(e, rank=i) for i, e in enumerate(advised, 1)]
    chosen, left = _choose(ranked, budget, limit, closed)
    left += sorted((e for e in entries if e.reason is not None), key=lambda e: e.name)
    plan = FleetPlan(
        planned_at=now,
        chosen=tuple(chosen),
        left=tuple(left),
        max_bytes=budget,
        max_tables=limit,
        window=None if window is None else str(window),
        window_closes=closes,
        next_window=opens,
        seconds=time.perf_counter() - started,
        _sources=dict(tables),
    )
    log.info("fleet plan: %s", plan.summary())
    return plan


# ---- the run -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetError:
    """One step of one table that failed.

    Attributes:
        step: "open", "compact", "optimize_indices" or "retention".
        error_type: The exception's class name.
        message: Its message.
    """

    step: str
    error_type: str
    message: str


@dataclass(frozen=True)
class FleetTableResult:
    """What `run_fleet` did on one table.

    Attributes:
        name: The table's name in the plan.
        uri: Its location.
        steps: The steps that ran and succeeded, in order.
        compaction: The compaction's metrics (None: not advised, or it failed).
        indices_updated: Indices brought up to date (None: not advised, or it failed).
        cleanup: What retention removed (None: not advised, or it failed).
        errors: The steps that failed.
        seconds: Wall time on this table.
    """

    name: str
    uri: str
    steps: tuple[str, ...] = ()
    compaction: CompactionMetrics | None = None
    indices_updated: int | None = None
    cleanup: CleanupStats | None = None
    errors: tuple[FleetError, ...] = ()
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Whether every advised step succeeded."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values."""
        return {**dataclasses.asdict(self), "ok": self.ok}


@dataclass(frozen=True)
class FleetRun:
    """What `run_fleet` did: one result per chosen table, in the plan's order.

    Attributes:
        results: The tables' results.
        seconds: Wall time of the run.
    """

    results: tuple[FleetTableResult, ...]
    seconds: float = 0.0

    @property
    def failed(self) -> tuple[FleetTableResult, ...]:
        """The tables with a failed step."""
        return tuple(r for r in self.results if not r.ok)

    def result(self, name: str) -> FleetTableResult:
        """One table's result.

        Args:
            name: the table's name in the plan

        Raises:
            KeyError: the run has no table of that name
        """
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"the fleet run has no table {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-ready values."""
        return {
            "results": [r.to_dict() for r in self.results],
            "seconds": self.seconds,
            "failed": [r.name for r in self.failed],
        }


def _target(entry: FleetEntry, source: Any, storage_options: dict[str, Any] | None) -> MaintainedTable:
    """The handle a chosen table's steps run on, at its latest version."""
    if source is None:
        if not entry.uri:
            raise ValueError(f"table {entry.name!r} has no URI in the plan and no table was given for it")
        source = entry.uri
    if isinstance(source, str):
        return _StateTable(TableState.open(source, storage_options=storage_options))
    if isinstance(source, TableState):
        return _StateTable(source.latest())
    return cast(MaintainedTable, source)


def _run_one(
    entry: FleetEntry, source: Any, storage_options: dict[str, Any] | None, partial_progress: bool
) -> FleetTableResult:
    started = time.perf_counter()
    done: list[str] = []
    errors: list[FleetError] = []
    found: dict[str, Any] = {}

    def step(name: str, fn: Callable[[], Any]) -> None:
        try:
            found[name] = fn()
            done.append(name)
        except Exception as exc:  # noqa: BLE001 - reported; the other steps and tables go on
            log.warning("fleet run: %s on table %s failed: %s", name, entry.name, exc)
            errors.append(FleetError(name, type(exc).__name__, str(exc)))

    step("open", lambda: _target(entry, source, storage_options))
    table = found.get("open")
    if table is not None:
        kinds = set(entry.kinds)
        if kinds & set(_COMPACTION_KINDS):
            step(
                "compact",
                lambda: table.optimize.compact_files(max_bytes=entry.byte_share, partial_progress=partial_progress),
            )
        if "optimize_indices" in kinds:
            step("optimize_indices", lambda: table.optimize.optimize_indices())
        if "retention" in kinds:
            step("retention", table.cleanup_old_versions)
    return FleetTableResult(
        name=entry.name,
        uri=entry.uri,
        steps=tuple(s for s in done if s != "open"),
        compaction=found.get("compact"),
        indices_updated=found.get("optimize_indices"),
        cleanup=found.get("retention"),
        errors=tuple(errors),
        seconds=time.perf_counter() - started,
    )


def run_fleet(
    plan: FleetPlan,
    tables: Mapping[str, Any] | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    max_workers: int = 1,
    partial_progress: bool = False,
) -> FleetRun:
    """Run the plan's chosen tables: for each, compaction (the table's policy, `max_bytes` = its byte share),
    index optimization and retention (the table's policy), each only when its advice named it. A failing step
    is reported in the table's result and the other steps and tables go on.

    Each table is opened at its latest version, so what committed since the plan is compacted too, within the
    same byte share.

    Args:
        plan: what `plan_fleet` (or `FleetPlan.from_dict`) returned
        tables: names to tables or URIs to run on (default: the ones the plan was made from, else the URIs in
            the plan)
        storage_options: the store's options for tables opened by URI
        max_workers: tables maintained at once (default 1: a compaction already uses the machine's cores)
        partial_progress: compactions commit finished groups as they complete (see `compact_files`)

    Raises:
        TypeError: `tables` is not a mapping of names to tables or URIs
        ValueError: `max_workers` is not a positive int
    """
    started = time.perf_counter()
    sources: Mapping[str, Any] = plan._sources if tables is None else tables
    _check_sources(sources)
    workers = _positive(max_workers, "max_workers") or 1

    def one(entry: FleetEntry) -> FleetTableResult:
        return _run_one(entry, sources.get(entry.name), storage_options, partial_progress)

    if workers == 1 or len(plan.chosen) <= 1:
        results = [one(e) for e in plan.chosen]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(plan.chosen)), thread_name_prefix="mvcc-fleet") as pool:
            results = list(pool.map(one, plan.chosen))
    run = FleetRun(tuple(results), time.perf_counter() - started)
    log.info("fleet run: %d tables, %d failed", len(results), len(run.failed))
    return run
