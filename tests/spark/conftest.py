"""One local SparkSession for every Spark test (starting one costs 5-15 s and ~800 MiB).

`local[2]`, no UI, the Python workers on this interpreter (`PYSPARK_PYTHON`) and importing this checkout's
`mvcc_core` (`PYTHONPATH`: the environment may hold an editable install of another checkout, and a worker
importing that one would test the wrong code; `test_workers_import_this_checkout` checks it).

Spark Connect (`connect` fixture): the same JVM also serves Spark Connect, started on first use (about a
second; no second JVM) on an ephemeral port of 127.0.0.1 and stopped at the end of the test session. A
Connect client session talks gRPC to it exactly as to a `start-connect-server.sh` server: plans, Python
data sources and `mapInArrow` functions run on the server side, in its Python workers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import PUSHDOWN, ROOT

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (extra 'spark')")


# The Spark tests of the fast tier: the documented paths once each (reading, writing, replaceWhere, the native
# reader and writer, the workers importing this checkout). Every other test that needs the SparkSession runs in
# the slow tier: a JVM and its jobs cost the fast tier minutes on two cores. Tests that need no session stay fast.
FAST_SPARK_TESTS = {
    "test_read.py": {"test_workers_import_this_checkout", "test_read_equals_to_table", "test_not_an_mvcc_path"},
    "test_write.py": {"test_round_trip_every_type", "test_replace_where"},
    "test_native_read.py": {"test_every_type_equals_the_data_source"},
    "test_native_write.py": {"test_native_and_core_writers_make_equal_tables"},
}


@pytest.hookimpl(tryfirst=True)  # before the tier's selection in tests/conftest.py reads the slow marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if path.is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.spark)
            name = getattr(item, "originalname", item.name)
            if "spark" in getattr(item, "fixturenames", ()) and name not in FAST_SPARK_TESTS.get(path.name, set()):
                item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """The session, and whether Spark found the `mvcc` source statically (before any register call)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("mvcc-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config(PUSHDOWN, "false")
        # read only when the `connect` fixture starts the Connect service in this JVM
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", "0")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def static_registration(spark_session: Any, tmp_path_factory: pytest.TempPathFactory) -> bool:
    """Whether `format("mvcc")` resolved before `register` was ever called (pyspark_mvcc on the path)."""
    import pyarrow as pa

    import mvcc_core

    uri = str(tmp_path_factory.mktemp("static") / "t")
    mvcc_core.write_table(pa.table({"id": [1]}), uri)
    try:
        spark_session.read.format("mvcc").load(uri).schema  # noqa: B018 - resolves the source
    except Exception:  # noqa: BLE001 - the test reports it
        return False
    return True


@pytest.fixture(scope="session")
def spark(spark_session: Any, static_registration: bool) -> Any:
    """The shared session with `mvcc` registered explicitly (after the static check)."""
    from mvcc_core.spark import register

    register(spark_session)
    return spark_session


@pytest.fixture(scope="session")
def connect(spark_session: Any) -> Iterator[Any]:
    """A Spark Connect client session, `mvcc` registered, served by the shared session's JVM.

    `SparkConnectService.start(sc)` is what the Connect plugin (`spark.plugins=...SparkConnectPlugin`,
    used by `start-connect-server.sh` and `SparkSession.builder.remote("local[2]")`) calls at startup;
    started here on the running SparkContext so that the suite keeps one JVM. The client is
    `pyspark.sql.connect.session.SparkSession` itself: the generic builder refuses a remote session in a
    process that holds a classic one.
    """
    pytest.importorskip("grpc_status", reason="Spark Connect needs pyspark[connect] (grpcio-status, ...)")
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from mvcc_core.spark import register

    jvm = spark_session.sparkContext._jvm
    service = getattr(getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$")
    service.start(spark_session.sparkContext._jsc.sc())
    client = ConnectSession.builder.remote(f"sc://127.0.0.1:{service.localPort()}").getOrCreate()
    register(client)
    yield client
    client.stop()
    service.stop(getattr(service, "stop$default$1")(), getattr(service, "stop$default$2")())
