"""Branch benchmarks: mvcc against pylance 14 on the same table, in the same run, as ratios.

On a table of `fragments` fragments (1,000 rows each, one version each): create a branch at the latest
version, append 1,000 rows to it, open its latest version (pylance: `checkout_version((branch, None))`).
mvcc's publish has no pylance counterpart: a fast-forward publish of a branch holding 10 appends is measured
against appending the same 10 batches straight to main (what the publish saves or costs over writing main
directly). A publish after main moved is measured as it is (main changed another row) against the same
publish run again (main changed one of the branch's rows: the branch's 10 updates re-run on main's latest
version). Rounds alternate mvcc and pylance (and publish and direct appends), each on a fresh copy of the
table, so a burst of load on the (shared) machine hits both. Not a test: run it by hand or through
`benchmarks/run.py`.

    python -m benchmarks.suite.bench_branches            # 100 fragments, median of 7
    python -m benchmarks.suite.bench_branches --quick    # 20 fragments, median of 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lance
import numpy as np
import pyarrow as pa

import mvcc_core as mvcc


def rows(start: int, n: int = 1000) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "value": ids * 0.5})


def build(root: Path, fragments: int) -> tuple[Path, Path]:
    """The same table for mvcc and pylance: one version a fragment."""
    m, lnc = root / "mvcc", root / "lance"
    t = mvcc.write_table(rows(0), str(m))
    lance.write_dataset(rows(0), str(lnc))
    for i in range(1, fragments):
        t.append(rows(i * 1000))
        lance.write_dataset(rows(i * 1000), str(lnc), mode="append")
    return m, lnc


def timed(op: Callable[[], Any]) -> float:
    start = time.perf_counter()
    op()
    return (time.perf_counter() - start) * 1e3


Results = dict[str, dict[str, list[float]]]


def _mvcc(uri: str, results: Results) -> None:
    t = mvcc.open_table(uri)
    results["create_branch"]["mvcc"].append(timed(lambda: t.create_branch("b")))
    b = mvcc.open_table(uri, branch="b")
    results["append 1,000 rows on a branch"]["mvcc"].append(timed(lambda: b.append(rows(10**7))))
    results["open a branch's latest version"]["mvcc"].append(timed(lambda: mvcc.open_table(uri, branch="b")))


def _lance(uri: str, results: Results) -> None:
    ds = lance.dataset(uri)
    results["create_branch"]["lance"].append(timed(lambda: ds.create_branch("b")))
    lb = ds.checkout_version(("b", None))
    results["append 1,000 rows on a branch"]["lance"].append(timed(lambda: lb.insert(rows(10**7))))
    opened = timed(lambda: lance.dataset(uri).checkout_version(("b", None)))
    results["open a branch's latest version"]["lance"].append(opened)


def _publish(uri: str, results: Results) -> None:
    t = mvcc.open_table(uri)
    b = t.create_branch("b")
    for i in range(10):
        b.append(rows(10**7 + i * 1000))
    results["10 appends landed on main"]["publish"].append(timed(lambda: t.publish_branch("b")))


def _moved(uri: str, results: Results, same_row: bool) -> None:
    """A branch with 10 single-row updates published after main updated another row (as it is) or one of the
    same rows (the branch's 10 updates run again on main's latest version)."""
    t = mvcc.open_table(uri)
    b = t.create_branch("b")
    for i in range(10):
        b.update({"value": "value + 1"}, where=f"id = {i * 1000 + 7}")
    t.update({"value": "value * 2"}, where="id = 7" if same_row else "id = 8")
    side = "run again" if same_row else "as it is"
    results["publish 10 updates after main moved"][side].append(timed(lambda: t.publish_branch("b")))


def _direct(uri: str, results: Results) -> None:
    t = mvcc.open_table(uri)

    def direct() -> None:
        for i in range(10):
            t.append(rows(10**7 + i * 1000))

    results["10 appends landed on main"]["direct"].append(timed(direct))


SIDES: dict[str, Callable[[str, Results], None]] = {
    "mvcc": _mvcc,
    "lance": _lance,
    "publish": _publish,
    "direct": _direct,
    "as it is": lambda uri, results: _moved(uri, results, same_row=False),
    "run again": lambda uri, results: _moved(uri, results, same_row=True),
}


def one_round(pristine: tuple[Path, Path], work: Path, results: Results) -> None:
    for side, run in SIDES.items():
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(pristine[1] if side == "lance" else pristine[0], work)
        run(str(work), results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--repeat", type=int, help="rounds (default 7, 3 with --quick)")
    args = parser.parse_args()
    fragments = 20 if args.quick else 100
    repeat = args.repeat or (3 if args.quick else 7)
    results: Results = {
        "create_branch": {"mvcc": [], "lance": []},
        "append 1,000 rows on a branch": {"mvcc": [], "lance": []},
        "open a branch's latest version": {"mvcc": [], "lance": []},
        "10 appends landed on main": {"publish": [], "direct": []},
        "publish 10 updates after main moved": {"as it is": [], "run again": []},
    }
    with tempfile.TemporaryDirectory() as tmp:
        pristine = build(Path(tmp) / "pristine", fragments)
        for _ in range(repeat):
            one_round(pristine, Path(tmp) / "work", results)
    medians = {name: {side: statistics.median(v) for side, v in sides.items()} for name, sides in results.items()}
    for name, sides in medians.items():
        (a, va), (b, vb) = sides.items()
        print(f"{name:34} {a} {va:8.2f} ms   {b} {vb:8.2f} ms   ratio {va / vb:5.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"fragments": fragments, "repeat": repeat, "medians": medians}))


if __name__ == "__main__":
    main()
