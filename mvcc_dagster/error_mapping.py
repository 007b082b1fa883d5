"""mvcc's errors as Dagster retries and failures: the one mapping (docs/integrations/dagster/io_manager.md,
"Conflicts")."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dagster as dg

import mvcc_core as mvcc

DEFAULT_MAX_RETRIES = 8
DEFAULT_DELAY = 0.2  # seconds; the first retry waits ~0.2 s, the 8th ~25 s (exponential, +/- jitter)
MAX_DELAY = 60.0


def conflict_retry_policy(
    max_retries: int = DEFAULT_MAX_RETRIES,
    delay: float = DEFAULT_DELAY,
    backoff: dg.Backoff = dg.Backoff.EXPONENTIAL,
    jitter: dg.Jitter = dg.Jitter.PLUS_MINUS,
) -> dg.RetryPolicy:
    """A `RetryPolicy` for assets and ops that commit to mvcc tables.

    Use it together with `mvcc_conflicts()` (or the IO manager, which applies the mapping itself): the
    mapping keeps errors that would fail again out of the policy, and the policy then retries what mvcc
    could not classify.

    Args:
        max_retries: Attempts after the first.
        delay: The base of the backoff, in seconds.
        backoff: Dagster's backoff.
        jitter: Dagster's jitter.

    Returns:
        The policy.
    """
    return dg.RetryPolicy(max_retries=max_retries, delay=delay, backoff=backoff, jitter=jitter)


def retry_wait(attempt: int, delay: float = DEFAULT_DELAY, *, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number `attempt + 1`: Dagster's EXPONENTIAL backoff `(2^(n) - 1) * delay`
    for the n-th retry, with PLUS_MINUS jitter of up to one `delay`, capped at `MAX_DELAY`.

    Args:
        attempt: Attempts before this one (0 on the first).
        delay: The base, in seconds.
        rng: The random source of the jitter (default: the module's).

    Returns:
        Seconds to wait.
    """
    n = attempt + 1
    base = (2**n - 1) * delay
    jitter = (rng or random).uniform(-delay, delay)
    return float(min(MAX_DELAY, max(0.0, base + jitter)))


def _attempt(context: Any) -> int:
    """How many attempts of the current step came before this one (0 on the first)."""
    if context is None:
        return 0
    for name in ("retry_number",):
        value = getattr(context, name, None)
        if isinstance(value, int):
            return value
    step_context = getattr(context, "step_context", None)
    value = getattr(step_context, "previous_attempt_count", None)
    return value if isinstance(value, int) else 0


def no_retry_failure(description: str, metadata: Mapping[str, Any] | None = None) -> dg.Failure:
    """A `Failure` that no `RetryPolicy` retries: for what would fail again (bad input, a lost commit).

    Args:
        description: What failed, in the user's words (shown in the UI and the run's log).
        metadata: Dagster metadata for the failure event.

    Returns:
        The failure, to be raised by the caller.
    """
    return dg.Failure(description=description, metadata=dict(metadata or {}), allow_retries=False)


def as_retryable(exc: mvcc.CommitConflictError, why: str) -> mvcc.RetryableConflictError:
    """`exc` as a retryable conflict (the same table and versions), for a conflict the step's next attempt resolves.

    Args:
        exc: The conflict.
        why: Why the next attempt succeeds, appended to `exc`'s message in parentheses.

    Returns:
        The retryable conflict, to be raised from `exc`.
    """
    return mvcc.RetryableConflictError(
        f"{exc} ({why})", uri=exc.uri, read_version=exc.read_version, conflicting_versions=exc.conflicting_versions
    )


def cannot_replay_branch(exc: BaseException) -> bool:
    """Whether `exc` is a branch publish that could not run the branch's writes again on main's newer rows: a
    table's `BranchNotReplayableError` or a catalog's conflict with rule ``branch_write_not_replayable``. A
    write-audit-publish step then runs again and writes on a fresh branch (`fresh_branch_retry`).

    Args:
        exc: What a publish raised.

    Returns:
        Whether it is that refusal.
    """
    return isinstance(exc, mvcc.errors.BranchNotReplayableError) or (
        isinstance(exc, mvcc.errors.CatalogConflictError) and exc.rule_code == "branch_write_not_replayable"
    )


def fresh_branch_retry(exc: mvcc.CommitConflictError) -> mvcc.RetryableConflictError:
    """The retry a write-audit-publish step's refused publish becomes (`cannot_replay_branch`): publishing
    again gives the same answer, writing again on a fresh branch from main's newer rows does not.

    Args:
        exc: The refused publish.

    Returns:
        The retryable conflict, to be raised from `exc` (the plugin's mapping makes it a `RetryRequested`).
    """
    return as_retryable(exc, "the step runs again and redoes its writes on a fresh branch")


def lost_implicit_create(exc: BaseException, created: set[str]) -> bool:
    """Whether `exc` is the catalog refusing a name a step created implicitly (a table from its first write, or
    that table's schema) because a concurrent step created the same name first: the step's next attempt finds
    the name and writes to it (`as_retryable`).

    Args:
        exc: What the catalog publish raised.
        created: The names the step created implicitly.

    Returns:
        Whether it is that race.
    """
    return (
        isinstance(exc, mvcc.errors.CatalogConflictError)
        and isinstance(exc, mvcc.IncompatibleConflictError)
        and exc.object_name in created
        and exc.rule_code in ("both_create_name", "both_create_schema")
    )


def conflict_metadata(exc: mvcc.CommitConflictError) -> dict[str, Any]:
    """What a conflict says about itself, as Dagster metadata (the table, both versions, both operations;
    a catalog conflict adds the object, the catalog versions expected and found, and the DuckLake rule).

    Args:
        exc: The conflict.

    Returns:
        The metadata.
    """
    meta: dict[str, Any] = {
        "table": exc.uri,
        "read_version": exc.read_version,
        "conflicting_versions": [int(v) for v in (exc.conflicting_versions or [])],
        "operation": exc.operation or "",
        "conflicting_operation": exc.conflicting_operation or "",
    }
    if isinstance(exc, mvcc.errors.CatalogConflictError):
        meta.update(
            {
                "catalog_object": exc.object_name,
                "expected_version": exc.expected_version,
                "actual_version": exc.actual_version,
                "rule": exc.rule,
                "rule_code": exc.rule_code,
            }
        )
    return meta


def _incompatible_description(exc: mvcc.IncompatibleConflictError, meta: dict[str, Any]) -> str:
    if isinstance(exc, mvcc.errors.CatalogConflictError):
        return (
            f"incompatible catalog conflict on {exc.object_name!r} in catalog {exc.uri}: this transaction "
            f"expected version {exc.expected_version}, found {exc.actual_version} ({exc.rule}); nothing was "
            f"published and it is not retried (re-run once the catalog is what the step expects): {exc}"
        )
    return (
        f"incompatible commit conflict on {exc.uri}: read version {exc.read_version}, "
        f"{exc.conflicting_operation} at version(s) {meta['conflicting_versions']} conflicts with "
        f"{exc.operation}; not retried (re-run once the table is what the step expects): {exc}"
    )


def to_dagster(
    exc: BaseException,
    *,
    attempt: int = 0,
    max_retries: int = DEFAULT_MAX_RETRIES,
    delay: float = DEFAULT_DELAY,
    what: str | None = None,
) -> BaseException | None:
    """The Dagster exception that `exc` becomes, or None when `exc` is not mvcc's to classify (it then
    propagates unchanged and a `RetryPolicy` decides). `what` names the asset or op in descriptions.

    Args:
        exc: What was raised.
        attempt: Attempts of the step before this one (sets the backoff).
        max_retries: The `RetryRequested` limit.
        delay: The base of the backoff, in seconds.
        what: The asset or op, named in descriptions.

    Returns:
        A `RetryRequested` or a `Failure`, or None.
    """
    prefix = f"{what}: " if what else ""
    if isinstance(exc, mvcc.RetryableConflictError) or (
        isinstance(exc, mvcc.TableExistsError) and exc.created_concurrently
    ):
        # A table another writer created while this step wrote: the next attempt sees it and decides again.
        return dg.RetryRequested(max_retries=max_retries, seconds_to_wait=retry_wait(attempt, delay))
    if isinstance(exc, mvcc.IncompatibleConflictError):
        meta = conflict_metadata(exc)
        return no_retry_failure(prefix + _incompatible_description(exc, meta), meta)
    if isinstance(exc, mvcc.MvccError | ValueError | TypeError):
        return no_retry_failure(
            f"{prefix}{type(exc).__name__}: {exc} (not retried: it would fail again)",
            {"error_type": type(exc).__name__},
        )
    return None


@contextmanager
def mvcc_conflicts(
    context: Any = None,
    *,
    max_retries: int = DEFAULT_MAX_RETRIES,
    delay: float = DEFAULT_DELAY,
    what: str | None = None,
) -> Iterator[None]:
    """Apply the mapping to mvcc calls in a user's asset or op::

        @dg.asset(retry_policy=conflict_retry_policy())
        def events(context, mvcc: MvccResource):
            with mvcc_conflicts(context):
                mvcc.open("events").delete("day < DATE '2020-01-01'")

    `context`: the execution context (its retry number sets the backoff), or an IO manager's context.

    Args:
        context: See above.
        max_retries: The `RetryRequested` limit.
        delay: The base of the backoff, in seconds.
        what: The asset or op, named in descriptions.

    Raises:
        dagster.RetryRequested: For a retryable conflict.
        dagster.Failure: For what would fail again (not retried).
    """
    try:
        yield
    except (dg.RetryRequested, dg.Failure):
        raise
    except Exception as exc:
        mapped = to_dagster(exc, attempt=_attempt(context), max_retries=max_retries, delay=delay, what=what)
        if mapped is None:
            raise
        raise mapped from exc
