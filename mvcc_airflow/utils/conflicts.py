"""The one place where mvcc errors become Airflow retries or failures (the Dagster side's mapping, in spirit).

Airflow retries a failed try while the task has `retries` left, whatever the exception, except
`AirflowFailException`, which fails the task at once. So the mapping only has to keep what would fail
again out of the retries:

- `RetryableConflictError` (a concurrent commit won; re-read and run again) propagates unchanged: the try
  fails and the task's `retries` (with exponential backoff, `DEFAULT_RETRY_ARGS`) run it again on the new
  version; so does a `TableExistsError` whose table another writer created meanwhile, a `StorageError` (a network
  fault, an unavailable external store; not a missing file), and anything mvcc cannot classify (`OSError`, a killed
  worker);
- `IncompatibleConflictError` (a restore or overwrite landed between read and commit), every other
  `MvccError` (a missing table or version, a refused operation, a corrupt manifest), `ValueError` and
  `TypeError` (bad input or configuration) become `AirflowFailException` with the error's own words.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException

import mvcc_core as mvcc

# What a task that commits to a table gets unless the DAG or the operator says otherwise: 4 retries waiting
# about 2 s, 4 s, 8 s, 16 s (Airflow's exponential backoff, with its own jitter), never more than 2 minutes.
DEFAULT_RETRY_ARGS: dict[str, Any] = {
    "retries": 4,
    "retry_delay": timedelta(seconds=2),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=2),
}


def is_retryable(exc: BaseException) -> bool:
    """Whether another try can succeed where this one failed with `exc` (a concurrent commit, a transient store).

    Args:
        exc: The exception a try raised.

    Returns:
        True when the task's retries should apply.
    """
    if isinstance(exc, mvcc.TableExistsError):
        return bool(exc.created_concurrently)
    if isinstance(exc, mvcc.errors.ObjectNotFoundError | mvcc.errors.CommitNotSupportedError):
        return False  # a missing file or a store that cannot commit stays so
    return isinstance(exc, mvcc.RetryableConflictError | mvcc.errors.StorageError)


def describe_conflict(exc: mvcc.CommitConflictError) -> str:
    """A conflict in words: the table, the version read, the versions and operations that collided.

    Args:
        exc: the conflict the core raised
    """
    versions = [int(v) for v in (exc.conflicting_versions or [])]
    return (
        f"incompatible commit conflict on {exc.uri}: read version {exc.read_version}, "
        f"{exc.conflicting_operation or 'a commit'} at version(s) {versions} conflicts with "
        f"{exc.operation or 'this operation'}; not retried (re-run once the table is what the task expects): {exc}"
    )


def to_airflow(exc: BaseException, what: str | None = None) -> BaseException | None:
    """The Airflow exception that `exc` becomes, or None when it is to propagate unchanged (then retried).

    Args:
        exc: The exception raised by an mvcc call.
        what: What the task was doing, named in the message (e.g. "compaction of events").

    Returns:
        An `AirflowFailException` for what would fail again; None for what the task's retries should handle.
    """
    prefix = f"{what}: " if what else ""
    if isinstance(exc, AirflowException) or is_retryable(exc):
        return None
    if isinstance(exc, mvcc.IncompatibleConflictError):
        return AirflowFailException(prefix + describe_conflict(exc))
    if isinstance(exc, mvcc.MvccError | ValueError | TypeError):
        return AirflowFailException(f"{prefix}{type(exc).__name__}: {exc} (not retried: it would fail again)")
    return None


@contextmanager
def mvcc_errors(what: str | None = None) -> Iterator[None]:
    """Apply the mapping to the mvcc calls in a task::

        @task(retries=4, retry_exponential_backoff=2.0)
        def purge():
            with mvcc_errors("purge of events"):
                MvccHook().open_table("events").delete("day < DATE '2020-01-01'")

    Args:
        what: What the calls do, named in failure messages.

    Raises:
        AirflowFailException: For an error another try would repeat.
    """
    try:
        yield
    except Exception as exc:
        mapped = to_airflow(exc, what)
        if mapped is None:
            raise
        raise mapped from exc
