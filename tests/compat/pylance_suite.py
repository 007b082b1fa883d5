"""Run pylance's own Python tests against mvcc_core through a name-only shim, and report the pass rate.

Usage (docs/reference/pylance_compat.md, "Measured against pylance's own tests"):

    python tests/compat/pylance_suite.py --git-dir /work/.mirror/lancedb+lance/repo [--rev HEAD] [--json OUT]
    python tests/compat/pylance_suite.py --tests DIR [--json OUT]

The upstream test files are copied into a temporary directory (never into this repository) and run twice with
pytest: once against the installed pylance (the reference), once with `tests/compat/pylance_shim` first on the
path, so that `import lance` gets pylance's names bound to mvcc_core's and nothing more. A test counts when it
is *in scope* (its file is in SUITE_FILES and nothing it calls is in OUT_OF_SCOPE, decided from its source
and that of the fixtures and module-level helpers it uses) and it passes against pylance itself.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIM = Path(__file__).resolve().parent / "pylance_shim"
UPSTREAM_DIR = "python/python/tests"

# The files that exercise the surface mvcc shares with pylance. Every other upstream file is about
# vectors, ANN/FTS indices, ML loaders, blobs, Lance files, namespaces, sessions or tracing: out of scope whole.
SUITE_FILES = (
    "test_dataset.py",
    "test_scalar_index.py",
    "test_schema_evolution.py",
    "test_optimize.py",
    "test_filter.py",
    "test_lance.py",
    "test_table_ops.py",
    "test_commit_index.py",
    "test_create_empty_index.py",
    "test_ingestion.py",
)
SUPPORT_FILES = ("conftest.py", "helper.py")

# A test that mentions any of these (as a name, attribute or string in its own source, its fixtures' or the
# module-level helpers' it calls) is out of scope, for the reason given. Patterns match whole identifiers or
# words inside string literals.
OUT_OF_SCOPE: dict[str, tuple[str, ...]] = {
    "vector search / vector indices": (
        r"nearest",
        r"IVF\w*",
        r"\w*HNSW\w*",
        r"vec_to_table",
        r"validate_vector_index",
        r"num_partitions",
        r"num_sub_vectors",
        r"create_empty_index",
        r"vector_index\w*",
    ),
    "full-text search and other index types": (
        r"full_text_query",
        r"INVERTED",
        r"FTS",
        r"NGRAM",
        r"LABEL_LIST",
        r"ZONEMAP",
        r"BLOOMFILTER",
        r"RTREE",
        r"MINHASHLSH",
        r"\w*Query",
        r"IndexConfig",
        r"with_position",
        r"contains_tokens",
        r"text_contains",
        r"json_extract",
        r"json_get\w*",
    ),
    "blobs": (r"\w*[bB]lob\w*",),
    "Lance file format, fragments and hand-built commits": (
        r"LanceFile\w*",
        r"stable_version",
        r"EXPECTED_\w*VERSION",
        r"format_fragment",
        r"LanceFragment",
        r"FragmentMetadata",
        r"DataFile",
        r"LanceOperation",
        r"commit_batch",
        r"write_fragments",
        r"get_fragment",
        r"get_fragments",
        r"fragment",
        r"fragments",
        r"_ds",
        r"_take_rows",
        r"_default_scan_options",
        r"lance_schema",
        r"LanceSchema",
        r"schema_to_json",
        r"json_to_schema",
        r"migrate_manifest_paths_v2",
        r"enable_v2_manifest_paths",
        r"historical_datasets",
        r"manifest_needs_migration",
        r"lance\.lance",
        r"bfloat16\w*",
        r"BFloat16\w*",
        r"ImageURI\w*",
        r"validate",
    ),
    "query plans and IO statistics": (
        r"explain_plan",
        r"analyze_plan",
        r"iops_counter",
        r"bytes_read_counter",
        r"ScanStatistics",
        r"scan_stats_callback",
        r"index_statistics",
        r"stats",
        r"data_stats",
    ),
    "branches, bases, namespaces, sessions, auto cleanup, commit locks": (
        r"create_branch",
        r"branches",
        r"checkout_branch",
        r"shallow_clone",
        r"DatasetBasePath",
        r"initial_bases",
        r"target_bases",
        r"add_bases",
        r"namespace\w*",
        r"session",
        r"Session",
        r"AutoCleanupConfig",
        r"auto_cleanup\w*",
        r"read_transaction",
        r"commit_lock",
    ),
    "sampling, ML loaders, other engines": (
        r"sample",
        r"sampler",
        r"ShardedBatchIterator",
        r"torch",
        r"tensorflow",
        r"duckdb",
        r"datafusion",
        r"sql",
        r"pa_ds",
        r"dataset\.dataset",
    ),
    "scan options outside the shared surface": (
        r"order_by",
        r"ColumnOrdering",
        r"fast_search",
        r"prefilter",
        r"strict_batch_size",
        r"with_fragments",
        r"scan_in_order",
        r"blocking",
        r"default_scan_options",
        r"late_materialization",
    ),
}
_OUT_PATTERNS = {reason: re.compile(r"\b(?:" + "|".join(p) + r")\b") for reason, p in OUT_OF_SCOPE.items()}


@dataclass
class Outcome:
    """One upstream test's result against pylance and against mvcc_core, and its scope."""

    nodeid: str
    in_scope: bool
    scope_reason: str
    lance: str
    mvcc: str
    mvcc_message: str


def extract(args: argparse.Namespace, into: Path) -> Path:
    """Copy the upstream test files into `into`/tests and return that directory."""
    target = into / "tests"
    if args.tests:
        shutil.copytree(args.tests, target)
        return target
    archive = subprocess.run(
        ["git", "--git-dir", args.git_dir, "archive", "--format=tar", args.rev, UPSTREAM_DIR],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    shutil.move(str(into / UPSTREAM_DIR), target)
    shutil.rmtree(into / "python")
    return target


def _words(node: ast.AST) -> set[str]:
    """Identifiers, attribute names and the words of string literals in `node`."""
    words: set[str] = set()
    docstrings = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    for sub in ast.walk(node):
        if id(sub) in docstrings:
            continue
        if isinstance(sub, ast.Name):
            words.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            words.add(sub.attr)
            if isinstance(sub.value, ast.Name):
                words.add(f"{sub.value.id}.{sub.attr}")
        elif isinstance(sub, ast.arg) or isinstance(sub, ast.keyword) and sub.arg:
            words.add(sub.arg)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            words.update(re.findall(r"[A-Za-z_][\w.]*", sub.value))
    return words


def scope_of(tests_dir: Path) -> dict[tuple[str, str], str]:
    """Map (file, test function) to "" when in scope, otherwise the reason it is out of scope."""
    conftest = ast.parse((tests_dir / "conftest.py").read_text())
    shared = {n.name: n for n in conftest.body if isinstance(n, ast.FunctionDef)}
    scopes: dict[tuple[str, str], str] = {}
    for file in SUITE_FILES:
        path = tests_dir / file
        if not path.exists():
            continue
        tree = ast.parse(path.read_text())
        functions = dict(shared)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.col_offset == 0:
                functions[node.name] = node
        for name, node in functions.items():
            if not name.startswith("test"):
                continue
            seen, todo, words = {name}, [node], set()
            while todo:
                current = todo.pop()
                current_words = _words(current)
                words |= current_words
                for word in current_words:
                    if word in functions and word not in seen:
                        seen.add(word)
                        todo.append(functions[word])
            text = " ".join(sorted(words))
            reason = next((r for r, pattern in _OUT_PATTERNS.items() if pattern.search(text)), "")
            scopes[(file, name)] = reason
    return scopes


def run_pytest(tests_dir: Path, against: str, args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    """Run the suite files against "lance" (pylance itself) or "mvcc" (the shim); nodeid -> (outcome, message)."""
    report = tests_dir.parent / f"junit-{against}.xml"
    paths = ([str(SHIM)] if against == "mvcc" else []) + [str(ROOT), *args.extra_path]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    files = [f for f in SUITE_FILES if (tests_dir / f).exists() and (not args.files or f in args.files)]
    command = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "--junitxml", str(report)]
    command += ["--timeout", str(args.timeout), "-o", "junit_family=xunit1", "-W", "ignore"]
    if args.workers > 1:
        command += ["-n", str(args.workers)]
    if args.k:
        command += ["-k", args.k]
    subprocess.run(command, cwd=tests_dir, env=env, capture_output=not args.verbose)
    results: dict[str, tuple[str, str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        nodeid = f"{case.get('file') or case.get('classname', '').replace('.', '/') + '.py'}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = "failed", (child.get("message") or "")[:300]
                break
            if child.tag == "skipped":
                outcome, message = "skipped", (child.get("message") or "")[:300]
        results[nodeid] = (outcome, message)
    return results


def main() -> int:
    """Extract, run against pylance and mvcc_core, classify, print the in-scope pass rate."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--tests", type=Path, help="a directory of upstream test files (python/python/tests)")
    source.add_argument("--git-dir", help="a lance git directory to extract python/python/tests from")
    parser.add_argument("--rev", default="HEAD", help="the revision of --git-dir (default HEAD)")
    parser.add_argument("--json", type=Path, help="write every test's outcome and scope here")
    parser.add_argument("--files", nargs="*", default=[], help="only these suite files")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--extra-path", nargs="*", default=[], help="more PYTHONPATH entries (e.g. polars)")
    parser.add_argument("--verbose", action="store_true", help="show pytest's output")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pylance-suite-") as tmp:
        tests_dir = extract(args, Path(tmp))
        (tests_dir / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow\n    integration\n    forward\n")
        scopes = scope_of(tests_dir)
        lance_results = run_pytest(tests_dir, "lance", args)
        mvcc_results = run_pytest(tests_dir, "mvcc", args)
    outcomes = []
    for nodeid, (mvcc_outcome, message) in sorted(mvcc_results.items()):
        file, _, test = nodeid.partition("::")
        reason = scopes.get((Path(file).name, test.split("[")[0]), "not a module-level test function")
        lance_outcome = lance_results.get(nodeid, ("missing", ""))[0]
        if not reason and lance_outcome != "passed":
            reason = f"{lance_outcome} on pylance itself"
        outcomes.append(Outcome(nodeid, not reason, reason, lance_outcome, mvcc_outcome, message))
    in_scope = [o for o in outcomes if o.in_scope]
    passed = sum(o.mvcc == "passed" for o in in_scope)
    print(f"upstream tests run: {len(outcomes)}; in scope: {len(in_scope)}; passed on mvcc_core: {passed}")
    print(f"in-scope pass rate: {100 * passed / max(len(in_scope), 1):.1f}%")
    print("out of scope:", dict(Counter(o.scope_reason for o in outcomes if not o.in_scope).most_common()))
    for file, count in sorted(Counter(o.nodeid.split("::")[0] for o in in_scope).items()):
        ok = sum(o.mvcc == "passed" for o in in_scope if o.nodeid.startswith(file + "::"))
        print(f"  {file}: {ok}/{count}")
    print("in-scope failures:")
    for o in in_scope:
        if o.mvcc != "passed":
            print(f"  {o.nodeid}: {o.mvcc_message.splitlines()[0] if o.mvcc_message else o.mvcc}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
