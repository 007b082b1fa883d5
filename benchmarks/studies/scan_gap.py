"""Where a table's full scan loses to a freshly compacted copy: the table as it is, the same fragments rewritten
without deletion vectors (each fragment's live rows as a fragment of its own), and one compacted copy, scanned in
interleaved rounds (`open_table(uri).to_table()`, CPU ms, medians). Not a test.

    python -m benchmarks.week --quick --keep /tmp/week && \
        python -m benchmarks.studies.scan_gap /tmp/week/mvcc-week-*/warehouse/raw_events

The copies are written under a temporary directory; the table is only read.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa

import mvcc_core as mvcc


def variants(uri: str, root: str) -> dict[str, str]:
    """The table, its fragments without deletion vectors, and one compacted copy: uri by name."""
    table = mvcc.open_table(uri)
    addressed = table.to_table(with_row_address=True)
    fragment_of = (addressed["_rowaddr"].to_numpy() >> np.uint64(32)).astype(np.int64)
    data = addressed.drop_columns(["_rowaddr"])
    uris = {"as is": uri, "no deletion vectors": f"{root}/no_dv", "compacted": f"{root}/one"}
    for i, fragment in enumerate(table.get_fragments()):
        part = data.filter(pa.array(fragment_of == fragment.fragment_id))
        if i == 0:
            mvcc.write_table(part, uris["no deletion vectors"])
        else:
            mvcc.open_table(uris["no deletion vectors"]).insert(part)
    mvcc.write_table(data, uris["compacted"])
    return uris


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("uri", help="the table to look at (local)")
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="mvcc-scan-gap-")
    try:
        uris = variants(args.uri, root)
        times: dict[str, list[float]] = {name: [] for name in uris}
        for round_number in range(args.rounds + 1):  # round 0 warms the caches
            for name, uri in uris.items():
                start = time.process_time()
                mvcc.open_table(uri).to_table()
                if round_number:
                    times[name].append((time.process_time() - start) * 1e3)
        compacted = statistics.median(times["compacted"])
        for name, values in times.items():
            median = statistics.median(values)
            ratio = median / compacted
            print(f"{name:20} {median:8.2f} ms CPU (min {min(values):.2f}), {ratio:.2f} x the compacted copy")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
