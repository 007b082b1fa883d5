"""mvcc errors as Airflow retries (propagated) or failures (`AirflowFailException`, not retried)."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException

import mvcc_core as mvcc
from mvcc_airflow.utils.conflicts import to_airflow


def test_conflicts_map_to_retries_or_failures() -> None:
    retryable = mvcc.RetryableConflictError("lost", uri="u", read_version=1, conflicting_versions=[2])
    assert to_airflow(retryable) is None  # propagates: the task's retries apply
    assert to_airflow(mvcc.errors.StorageError("connection reset")) is None
    assert to_airflow(OSError("network")) is None
    incompatible = mvcc.IncompatibleConflictError(
        "restored",
        uri="u",
        read_version=1,
        conflicting_versions=[2],
        operation="Rewrite",
        conflicting_operation="Restore",
    )
    failure = to_airflow(incompatible, "compaction of u")
    assert isinstance(failure, AirflowFailException)
    assert "compaction of u: incompatible commit conflict on u" in str(failure) and "Restore" in str(failure)
    for exc in (
        mvcc.errors.ObjectNotFoundError("gone"),
        mvcc.errors.TagError("no tag"),
        ValueError("bad"),
        TypeError("bad"),
    ):
        assert isinstance(to_airflow(exc), AirflowFailException), exc
    concurrent = mvcc.TableExistsError("exists", uri="u", created_concurrently=True)
    assert to_airflow(concurrent) is None
    assert isinstance(to_airflow(mvcc.TableExistsError("exists", uri="u")), AirflowFailException)
