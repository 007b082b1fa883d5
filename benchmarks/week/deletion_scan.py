"""What deletion vectors cost a full scan, apart from the fragment count (benchmarks/results.md, "The week").

``python -m benchmarks.week.deletion_scan --trials 2`` writes the week's rows (benchmarks/week/simulation.py: 42 appends
of 20,000 events, a week at 6 appends a day) as 7 fragments of 120,000 rows, twice: once as they are, once
with 1 % of every fragment deleted (a deletion vector on every file, as the week's daily GDPR delete leaves
them). Each is scanned whole against a one-fragment copy of the same live rows; the figures are the best CPU
milliseconds of `--scans` scans, and the ratio to the copy's.
"""

import argparse
import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa

import mvcc_core as mvcc

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Print, per trial, the scan CPU of 7 fragments without and with deletions against a compacted copy."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=2)
    p.add_argument("--scans", type=int, default=9)
    a = p.parse_args()
    os.environ.setdefault("MVCC_WEEK_SETTINGS", json.dumps({"rows_per_hour": 20000}))
    from benchmarks.week import metrics as week_metrics
    from benchmarks.week import simulation as week  # the week's event rows

    appends = [week.event_rows(hour, 20000) for hour in range(0, 24 * 7, 4)]
    per_fragment = len(appends) // 7
    with tempfile.TemporaryDirectory(prefix="mvcc-deletion-scan-") as tmp:
        root = Path(tmp)
        for trial in range(a.trials):
            result = {}
            for kind in ("no deletions", "1% deleted in every fragment"):
                uri = str(root / f"{trial}-{len(result)}")
                for i in range(7):
                    part = pa.concat_tables(appends[i * per_fragment : (i + 1) * per_fragment])
                    mvcc.write_table(part, uri) if i == 0 else mvcc.open_table(uri).append(part)
                if result:
                    mvcc.open_table(uri).delete("event_id % 100 = 7")
                mvcc.write_table(mvcc.open_table(uri).to_table(), f"{uri}-compacted")
                # the table and its copy scanned in turn, the best CPU of each (week_metrics.best_scans)
                (_, scan), (_, compacted) = week_metrics.best_scans([uri, f"{uri}-compacted"], a.scans)
                scan, compacted = scan * 1000, compacted * 1000
                result[kind] = {"7 fragments ms": round(scan, 1), "one fragment ms": round(compacted, 1)}
                result[kind]["ratio"] = round(scan / compacted, 2)
            print(json.dumps({"trial": trial, **result}), flush=True)


if __name__ == "__main__":
    main()
