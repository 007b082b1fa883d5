"""The week benchmark's end-of-day measurements of one table (benchmarks/week/simulation.py)."""

import shutil
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

import mvcc_core as mvcc


def dir_bytes(path: Path) -> int:
    """Bytes of every file under `path` (the table's stored bytes)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def stored_by_kind(root: Path, latest_files: set[str]) -> dict[str, int]:
    """Bytes under a table's root by kind: the latest version's data files, older versions' data files,
    deletion files, manifests, transaction files, index files and anything else (which bytes a table keeps)."""
    kinds = {"_versions": "manifests", "_transactions": "transactions", "_deletions": "deletion_files"}
    out: dict[str, int] = defaultdict(int)
    for f in root.rglob("*"):
        if not f.is_file():
            continue
        top = f.relative_to(root).parts[0]
        if top == "data":
            kind = "data_latest" if f.name in latest_files or f"data/{f.name}" in latest_files else "data_older"
        else:
            kind = kinds.get(top, "indices" if top.startswith("_indices") else "other")
        out[kind] += f.stat().st_size
    return dict(out)


def scan_once(uri: str) -> tuple[pa.Table, float, float]:
    """The table's latest version read whole: the rows, wall seconds and CPU seconds of this process."""
    cpu, t = time.process_time(), time.perf_counter()
    data = mvcc.open_table(uri).to_table()
    return data, time.perf_counter() - t, time.process_time() - cpu


def best_scans(uris: list[str], repeats: int = 7) -> list[tuple[float, float]]:
    """The best wall and CPU seconds of `repeats` full scans of each table, the tables taken in turn (a scan
    of each, then again): a burst of other work (a run's process, the harness's threads, whose CPU this
    process's clock counts too) then slows a scan of each rather than every scan of one, so the ratio of the
    bests is the tables' (the readers are paused meanwhile; on a busy machine the CPU is the steadier one)."""
    best = [(float("inf"), float("inf")) for _ in uris]
    for _ in range(repeats):
        for i, uri in enumerate(uris):
            _, wall, cpu = scan_once(uri)
            best[i] = (min(best[i][0], wall), min(best[i][1], cpu))
    return best


def table_metrics(root: Path, name: str, small_rows: int, scratch: Path, cutoff: datetime) -> dict[str, Any] | None:
    """One table's end-of-day measurements; live bytes are the bytes of a freshly compacted copy; "removable"
    is what retention could remove with the versions committed before `cutoff` gone."""
    uri = str(root / name)
    try:
        table = mvcc.open_table(uri)
    except mvcc.TableNotFoundError:
        return None
    fragments = table.get_fragments()
    live = [f.count_rows() for f in fragments]
    physical = sum(int(f.physical_rows) for f in fragments)
    # what retention could remove now (a dry run with the jobs' window; unverified files too): the stored bytes
    # beyond what the window keeps on purpose (its versions' files, manifests and transactions)
    window = datetime.now(UTC) - cutoff
    removable = table.cleanup_old_versions(window, dry_run=True, delete_unverified=True)
    data = scan_once(uri)[0]
    copy = scratch / f"{name}-compacted"
    shutil.rmtree(copy, ignore_errors=True)
    mvcc.write_table(data, str(copy))
    (scan, scan_cpu), (compacted_scan, compacted_cpu) = best_scans([uri, str(copy)])
    metrics = {
        "table": name,
        "version": table.version,
        "fragments": len(fragments),
        "small_fragments": sum(1 for rows in live if rows < small_rows),
        "live_rows": data.num_rows,
        "live_bytes": dir_bytes(copy / "data"),
        "stored_bytes": dir_bytes(Path(uri)),
        "stored_data_bytes": dir_bytes(Path(uri) / "data"),  # the rest: manifests, transactions, deletion files
        "removable_bytes": removable.bytes_removed,
        # what the removable bytes are: versions (a manifest and a transaction file each) and files
        "removable": {
            "versions": removable.old_versions,
            "data_files": removable.data_files_removed,
            "deletion_files": removable.deletion_files_removed,
            "transaction_files": removable.transaction_files_removed,
            "index_files": removable.index_files_removed,
            "unverified_files": removable.unverified_files_removed,
        },
        "stored_by_kind": stored_by_kind(Path(uri), {df.path for f in fragments for df in f.data_files()}),
        "versions_kept": len(table.versions()),
        "deleted_share": round((physical - sum(live)) / physical, 4) if physical else 0.0,
        "scan_seconds": round(scan, 4),
        "compacted_scan_seconds": round(compacted_scan, 4),
        "scan_cpu_seconds": round(scan_cpu, 4),
        "compacted_scan_cpu_seconds": round(compacted_cpu, 4),
    }
    shutil.rmtree(copy, ignore_errors=True)
    return metrics
