"""`format("mvcc")` in a fresh process after a real install of this checkout (docs/guide/spark.md, "Registration").

Each test installs the checkout into a new virtual environment (`pip install --no-deps --no-build-isolation`,
offline; the test interpreter's site-packages supply pyspark and the other dependencies) and runs a fresh
interpreter there, with no PYTHONPATH and the environment's `bin` first on PATH, as a user's shell after
`pip install` would have it:

- a regular install puts `pyspark_mvcc` in site-packages, where PySpark's lookup of `pyspark_*` modules finds
  it: `format("mvcc")` works without `register`;
- an editable install (the README's `pip install -e`) is served by setuptools' import hook, which PySpark's
  lookup cannot list; the README's Spark section, which calls `register(spark)` first, works there as pasted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
from spark_helpers import ROOT

#: What a build of the distribution reads (pyproject's packages, its readme).
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "mvcc_core", "pyspark_mvcc", "mvcc_dagster"]

#: Loads a table through `format("mvcc")` without calling `register`; prints what it saw as JSON.
PROBE = textwrap.dedent(
    """
    import json, pkgutil, sys
    import pyarrow as pa
    from pyspark.sql import SparkSession
    import mvcc_core

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    uri = sys.argv[1]
    mvcc_core.write_table(pa.table({"id": [1, 2, 3]}), uri)
    try:
        rows = spark.read.format("mvcc").load(uri).count()
        error = None
    except Exception as exc:
        rows, error = None, str(exc)[:2000]
    hook_listed = any(m.name == "pyspark_mvcc" for m in pkgutil.iter_modules())
    print("PROBE " + json.dumps({"rows": rows, "error": error, "hook_listed": hook_listed,
                                 "mvcc_core": mvcc_core.__file__}))
    """
)


def install(tmp_path: Path, *, editable: bool) -> Path:
    """A virtual environment with this checkout installed (a copy of its sources); returns its `bin`."""
    source = tmp_path / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the dependencies (pyspark, pyarrow, pip, setuptools, ...) from the test's own environment, offline
    Path(purelib, "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    command = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation"]
    command += ["-e", str(source)] if editable else [str(source)]
    subprocess.run(command, check=True, capture_output=True, env=user_environment(env_dir / "bin"), cwd=tmp_path)
    return env_dir / "bin"


def user_environment(bin_dir: Path) -> dict[str, str]:
    """A shell with the environment activated: its `bin` first on PATH, nothing of the test session's paths
    (PySpark's workers then run the environment's `python3`, as after the README's install)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(bin_dir.parent)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def run_python(bin_dir: Path, code: str, *args: str, cwd: Path, with_stderr: bool = False) -> str:
    """Run `code` in a fresh interpreter of the environment; its stdout (stderr shown on failure; appended with
    `with_stderr`)."""
    result = subprocess.run(
        [str(bin_dir / "python"), "-c", code, *args],
        capture_output=True,
        text=True,
        env=user_environment(bin_dir),
        cwd=cwd,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + (result.stderr if with_stderr else "")


def probe(output: str) -> dict:
    (line,) = [line for line in output.splitlines() if line.startswith("PROBE ")]
    return json.loads(line.removeprefix("PROBE "))


def readme_spark_code() -> str:
    """The python blocks of the README's "## Spark" section, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Spark\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "README.md has no python block under ## Spark"
    return "\n".join(blocks)


@pytest.mark.slow
def test_a_regular_install_registers_mvcc_without_register(tmp_path: Path) -> None:
    bin_dir = install(tmp_path, editable=False)
    work = tmp_path / "work"
    work.mkdir()
    seen = probe(run_python(bin_dir, PROBE, str(tmp_path / "t"), cwd=work))
    assert "site-packages" in seen["mvcc_core"], seen  # the installed copy, not a source tree
    assert seen["hook_listed"] and seen["rows"] == 3, seen


@pytest.mark.slow
def test_register_after_the_static_registration_replaces_nothing(tmp_path: Path) -> None:
    """The README calls `register(spark)`; after a regular install the source is registered already, and
    registering it again would make Spark warn that it replaced a data source."""
    bin_dir = install(tmp_path, editable=False)
    work = tmp_path / "work"
    work.mkdir()
    code = PROBE + "\nimport mvcc_core.spark\nmvcc_core.spark.register(spark)\nmvcc_core.spark.register(spark)\n"
    code += "print('AFTER', spark.read.format('mvcc').load(uri).count())\n"
    output = run_python(bin_dir, code, str(tmp_path / "t"), cwd=work, with_stderr=True)
    assert probe(output)["rows"] == 3 and "AFTER 3" in output, output[-3000:]
    assert "replaced a previously registered data source" not in output, output[-3000:]


@pytest.mark.slow
def test_readme_spark_section_runs_after_an_editable_install(tmp_path: Path) -> None:
    """The README's lines as pasted, after `pip install -e`; first, without `register`, `format("mvcc")` is
    found exactly when PySpark's lookup can list `pyspark_mvcc` (setuptools' import hook hides it)."""
    bin_dir = install(tmp_path, editable=True)
    work = tmp_path / "work"
    work.mkdir()
    table = tmp_path / "spark_events"
    code = PROBE + "\n" + readme_spark_code().replace("/tmp/spark_events", str(table))
    output = run_python(bin_dir, code, str(tmp_path / "t"), cwd=work)
    seen = probe(output)
    assert seen["mvcc_core"] == str(tmp_path / "src" / "mvcc_core" / "__init__.py"), seen  # editable: the sources
    assert (seen["rows"] == 3) == seen["hook_listed"], seen
    if not seen["hook_listed"]:
        assert "DATA_SOURCE_NOT_FOUND" in seen["error"], seen
    assert "1 100" in output.splitlines()  # version 1 with 100 rows
    assert re.search(r"\|\s*user1\|\s*2425\.5\|", output), output  # 1.5 * (1 + 4 + ... + 97)
    assert len(re.findall(r"^\|\s*9\d\|", output, flags=re.M)) == 10, output  # ids 90..99
