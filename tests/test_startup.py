"""What a fresh process imports: `import mvcc_core` and the `mvcc` command's module load none of the heavy
libraries (pyarrow.dataset, which imports pandas; sqlglot; the table code) until a name needs them, and the
command's defaults that stand in for the library's agree with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

import mvcc_core as mvcc
from mvcc_core.cli.options import SMALL_ROWS
from mvcc_core.compaction import CompactionOptions

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pyarrow.dataset", "pandas", "sqlglot", "mvcc_core.table", "mvcc_core.catalog", "fsspec")


def loaded_after(code: str) -> dict[str, bool]:
    """Which of HEAVY a fresh interpreter has imported after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_package_and_the_command_import_nothing_heavy() -> None:
    loaded = loaded_after("import mvcc_core, mvcc_core.cli, mvcc_core.errors\nassert mvcc_core.__version__")
    assert not any(loaded.values()), loaded


def test_root_names_import_on_first_use() -> None:
    loaded = loaded_after("import mvcc_core\nmvcc_core.open_table")
    assert loaded["mvcc_core.table"] and not loaded["pyarrow.dataset"], loaded


def test_show_on_a_local_table_needs_no_pyarrow_dataset(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    mvcc.write_table(pa.table({"id": [1, 2, 3]}), uri)
    code = (
        "import sys\nfrom mvcc_core.cli import main\n"
        f"sys.argv = ['mvcc', 'show', {uri!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code"
    )
    loaded = loaded_after(code)
    assert not loaded["pyarrow.dataset"] and not loaded["pandas"] and not loaded["sqlglot"], loaded


def test_writes_and_scans_without_a_sql_string_do_not_load_the_sql_parser(tmp_path: Path) -> None:
    """sqlglot (about 0.1-0.15 s of a process's start) is loaded by the first SQL string, not before."""
    uri = str(tmp_path / "t")
    code = (
        "import pyarrow as pa, pyarrow.compute as pc, mvcc_core as mvcc\n"
        f"t = mvcc.write_table(pa.table({{'id': [1, 2, 3]}}), {uri!r})\n"
        "t.append(pa.table({'id': [4]}))\n"
        "assert t.to_table(filter=pc.field('id') > 2).num_rows == 2 and t.count_rows() == 4\n"
        "import sys\nassert 'sqlglot' not in sys.modules, 'loaded before any SQL'\n"
        "assert t.to_table(filter='id > 2').num_rows == 2"
    )
    assert loaded_after(code)["sqlglot"]


def test_the_commands_small_rows_default_is_compactions() -> None:
    assert CompactionOptions().target_rows_per_fragment == SMALL_ROWS
