"""What the hooks, operators, sensors and triggers share.

- `conflicts`: mvcc errors as Airflow retries or failures; `mvcc_errors()` for a user's own tasks;
- `task_results`: the transaction properties a task stamps on its commits, the XCom value operators return;
- `versions`: which version of a table is new since a baseline (the sensor's and the trigger's look);
- `compaction_calls`: every call into the core's compaction seam, and the JSON form of its tasks and results.
"""
