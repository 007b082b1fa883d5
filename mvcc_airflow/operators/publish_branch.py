"""`MvccPublishBranchOperator`: a branch's changes landed on main in one version (the publish of
write-audit-publish; docs/guide/write_audit_publish.md, "Airflow").

A DAG writes to a branch (e.g. named after its run), audits it in tasks of its own, and publishes with this
operator once the audits succeeded; a failed audit task leaves the publish unrun (Airflow's default trigger
rule) and main untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..assets.mvcc import OPERATION_EXTRA, VERSION_EXTRA, table_asset
from ..hooks.mvcc import DEFAULT_CONN_ID
from ..utils.conflicts import mvcc_errors
from ..utils.task_results import airflow_properties, task_result
from .base import MvccBaseOperator

__all__ = ["PUBLISH_OPERATION", "MvccPublishBranchOperator"]

PUBLISH_OPERATION = "publish_branch"
"""The ``operation`` the operator returns and puts on its asset event."""


class MvccPublishBranchOperator(MvccBaseOperator):
    """Publish a branch of a table to main (`Table.publish_branch`): one new version of main holding the
    branch's changes since it forked. Emits the table's asset event (main's data changed).

    When main has moved since the fork, the branch's changes are checked against main's commits as any
    concurrent commit is: compatible ones are rebased and published; an incompatible one fails the task
    without a retry and leaves main untouched. A retryable conflict (a commit racing the publish) is retried
    by the task's retries.

    Args:
        table: A table name under the connection's root uri, or a full uri.
        branch: The branch to publish (templated).
        delete_branch: Delete the branch once published.
        commit_message: The publish's commit message (default: ``airflow: publish branch <branch>``).
        transaction_properties: Added to the task's own (``airflow/dag_id``, ``airflow/run_id``, ...).
        mvcc_conn_id: The Airflow connection of type ``mvcc``.
        **kwargs: `BaseOperator`'s arguments.

    Raises:
        ValueError: `branch` is empty, or `transaction_properties` is not a mapping of strings.
    """

    template_fields: Sequence[str] = ("table", "branch", "commit_message")
    ui_color = "#d3f9d8"

    def __init__(
        self,
        *,
        table: str,
        branch: str,
        delete_branch: bool = False,
        commit_message: str | None = None,
        transaction_properties: Mapping[str, str] | None = None,
        mvcc_conn_id: str = DEFAULT_CONN_ID,
        **kwargs: Any,
    ) -> None:
        if "outlets" not in kwargs and "{{" not in table:
            kwargs["outlets"] = [table_asset(table, mvcc_conn_id=mvcc_conn_id)]
        super().__init__(table=table, mvcc_conn_id=mvcc_conn_id, **kwargs)
        if not isinstance(branch, str) or not branch.strip():
            raise ValueError(f"{self.task_id}: branch must be a branch name, got {branch!r}")
        if not isinstance(delete_branch, bool):
            raise ValueError(f"{self.task_id}: delete_branch must be True or False, got {delete_branch!r}")
        properties = dict(transaction_properties or {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items()):
            raise ValueError(f"{self.task_id}: transaction_properties must map strings to strings, got {properties!r}")
        self.branch = branch
        self.delete_branch = delete_branch
        self.commit_message = commit_message
        self.transaction_properties = properties

    def execute(self, context: Context) -> dict[str, Any]:
        """Publish the branch and emit the asset event.

        Returns:
            ``{"table", "version" (main's new version), "operation": "publish_branch", "metrics": {"branch",
            "branch_version", "deleted_branch"}}``.

        Raises:
            AirflowFailException: The branch does not exist, or its changes conflict with main's.
        """
        t = self.open()
        if self.branch not in t.branches.list():
            raise AirflowFailException(f"{self.task_id}: table {t.uri} has no branch {self.branch!r}")
        properties = {**airflow_properties(context, PUBLISH_OPERATION), **self.transaction_properties}
        with mvcc_errors(f"publish of branch {self.branch!r} of {t.uri}"):
            branch_version = t.checkout_branch(self.branch).version
            version = t.publish_branch(
                self.branch,
                delete_branch=self.delete_branch,
                commit_message=self.commit_message or f"airflow: publish branch {self.branch}",
                transaction_properties=properties,
            )
        published = t.checkout_version(version)
        for outlet in self.outlets:
            context["outlet_events"][outlet].extra = {VERSION_EXTRA: version, OPERATION_EXTRA: PUBLISH_OPERATION}
        self.log.info("%s: branch %s (version %s) published as version %s", t.uri, self.branch, branch_version, version)
        metrics = {"branch": self.branch, "branch_version": branch_version, "deleted_branch": self.delete_branch}
        return task_result(published, PUBLISH_OPERATION, metrics)
