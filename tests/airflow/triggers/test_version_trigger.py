"""`MvccVersionTrigger` as the triggerer rebuilds it: from the classpath and arguments it serialized."""

from __future__ import annotations

from airflow.jobs.triggerer_job_runner import TriggerRunner

from mvcc_airflow.triggers import MvccVersionTrigger


def test_the_serialized_classpath_resolves_in_the_triggerer_to_an_equal_trigger() -> None:
    trigger = MvccVersionTrigger(table="events", after_version=3, mvcc_conn_id="wh", poll_interval=5.0)
    classpath, kwargs = trigger.serialize()
    assert classpath == "mvcc_airflow.triggers.table_version.MvccVersionTrigger"
    rebuilt = TriggerRunner().get_trigger_by_classpath(classpath)(**kwargs)
    assert isinstance(rebuilt, MvccVersionTrigger) and rebuilt.serialize() == (classpath, kwargs)


def test_a_trigger_deferred_under_the_previous_releases_classpath_still_resolves() -> None:
    assert TriggerRunner().get_trigger_by_classpath("mvcc_airflow.triggers.MvccVersionTrigger") is MvccVersionTrigger
