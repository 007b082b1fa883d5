"""Write-audit-publish on the table ``orders``: a task writes the run's rows to the branch
``audit-<logical date>``, a second audits them there, and `MvccPublishBranchOperator` lands them on main in one
version only when the audit passed (it emits the table's asset event). Trigger with ``{"bad_rows": true}`` to see
the audit fail: the publish stays unrun, main keeps its rows, the branch stays for inspection (a later run of the
same logical date replaces it). docs/guide/write_audit_publish.md."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
from airflow.sdk import DAG, Param, task
from airflow.sdk.exceptions import AirflowFailException

from mvcc_airflow import MvccHook, MvccPublishBranchOperator

TABLE = "orders"
BRANCH = "audit-{{ ts_nodash }}"  # letters, digits and '-': a valid branch name

with DAG(
    dag_id="mvcc_write_audit_publish",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"bad_rows": Param(False, type="boolean", description="write a negative amount (the audit fails)")},
    tags=["mvcc", "write-audit-publish"],
    doc_md=__doc__,
):

    @task(retries=0)
    def write(branch: str, params: dict | None = None) -> str:
        """The run's rows, appended on a fresh branch of main."""
        main = MvccHook().open_table(TABLE)
        if branch in main.branches.list():
            main.branches.delete(branch)  # an earlier run of the same logical date
        amount = -3.0 if (params or {}).get("bad_rows") else 3.0
        main.create_branch(branch).append(pa.table({"id": [3], "amount": [amount]}))
        return branch

    @task(retries=0)
    def audit(branch: str) -> None:
        """No negative amount on the branch (a failure is final: the data would not change on a retry)."""
        bad = MvccHook().open_table(TABLE).checkout_branch(branch).count_rows("amount < 0")
        if bad:
            raise AirflowFailException(f"{bad} negative amount(s) on branch {branch}; not published")

    publish = MvccPublishBranchOperator(
        task_id="publish", table=TABLE, branch=BRANCH, delete_branch=True, commit_message="airflow: audited orders"
    )
    audit(write(BRANCH)) >> publish
