"""The verifier's Spark session: driver memory from the machine, workers on this interpreter, and a
session on another master never silently reused."""

from __future__ import annotations

import sys

import pytest

from pulsarlab.verify.session import GIB, default_driver_memory, spark_session


@pytest.mark.parametrize(("total", "expected"), [(2 * GIB, "1g"), (6 * GIB, "1g"), (24 * GIB, "6g"), (256 * GIB, "8g")])
def test_driver_memory_is_a_quarter_of_ram_between_1_and_8_gib(total: int, expected: str) -> None:
    assert default_driver_memory(total) == expected


def test_driver_memory_of_this_machine_is_in_range() -> None:
    assert 1 <= int(default_driver_memory().removesuffix("g")) <= 8


def test_other_master_gets_a_new_session_and_workers_run_this_python() -> None:
    first = spark_session("local[1]", shuffle_partitions=1, driver_memory="1g")
    try:
        assert first.sparkContext.pythonExec == sys.executable
        assert spark_session().sparkContext.master == "local[1]"  # no master given: the running one serves
        second = spark_session("local[2]", shuffle_partitions=1, driver_memory="1g")
        assert second.sparkContext.master == "local[2]"
        assert first.sparkContext._jsc is None  # stopped, not left running beside the new one
        assert second.range(4).mapInArrow(lambda batches: batches, "id long").count() == 4  # Python workers start
        assert spark_session(executor_python="/opt/other/python3").sparkContext.pythonExec == "/opt/other/python3"
    finally:
        spark_session().stop()


def _where_the_worker_imports_from(batches):  # type: ignore[no-untyped-def]
    import sys

    import pyarrow as pa
    import pyspark

    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"file": [pyspark.__file__], "zips": [";".join(e for e in sys.path if e.endswith(".zip"))]})


def test_local_python_workers_import_the_installed_pyspark_not_its_zip(spark) -> None:  # type: ignore[no-untyped-def]
    """Spark puts ``pyspark.zip`` first on its Python workers' path, and Python compiles a zip's modules
    at every import; a local session's daemon drops that zip of the installed package, so its
    workers import the compiled package (and the daemon forks the first of them in a fraction of the time)."""
    import pyspark

    rows = spark.range(2).mapInArrow(_where_the_worker_imports_from, "file string, zips string").collect()
    assert rows, "no Python worker answered"
    for row in rows:  # one per task
        assert row["file"] == pyspark.__file__ and ".zip" not in row["file"], row
        assert "pyspark.zip" not in row["zips"] and "py4j" not in row["zips"], row


def test_only_zips_of_the_installed_pyspark_are_dropped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pulsarlab.verify.pydaemon import installed_zips

    site = tmp_path / "site"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (site / "py4j").mkdir()
    (site / "py4j" / "__init__.py").write_text("")
    from importlib import metadata

    py4j = metadata.version("py4j")
    spark_zip, py4j_zip = str(lib / "pyspark.zip"), str(lib / f"py4j-{py4j}-src.zip")
    other = str(tmp_path / "elsewhere" / "pyspark.zip")
    assert installed_zips([spark_zip, py4j_zip, other, str(site)]) == {spark_zip, py4j_zip}
    assert installed_zips([spark_zip, py4j_zip]) == set()  # the package itself not on the path: the zips stay
    assert installed_zips([str(lib / "py4j-0.0.1-src.zip"), spark_zip, str(site)]) == {spark_zip}  # another py4j stays


def test_another_interpreter_for_the_workers_keeps_sparks_own_daemon() -> None:
    """pulsarlab's daemon runs only on this interpreter (pulsarlab is installed here); workers asked to
    run another get Spark's own daemon, also when a session with pulsarlab's was running."""
    first = spark_session("local[1]", shuffle_partitions=1, driver_memory="1g")
    try:
        assert first.sparkContext.getConf().get("spark.python.daemon.module") == "pulsarlab.verify.pydaemon"
        other = spark_session("local[1]", executor_python="/opt/other/python3")
        assert first.sparkContext._jsc is None  # not reused: its workers' daemon needs this interpreter
        assert other.sparkContext.pythonExec == "/opt/other/python3"
        assert other.sparkContext.getConf().get("spark.python.daemon.module") == "pyspark.daemon"
    finally:
        spark_session().stop()
