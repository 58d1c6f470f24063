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
