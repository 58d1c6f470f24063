"""One place that creates the Spark session the verifier runs in."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def spark_session(
    master: str | None = None,
    *,
    shuffle_partitions: int | None = None,
    driver_memory: str = "6g",
    app_name: str = "pulsarlab-verify",
) -> SparkSession:
    """Get (or create) a quiet Spark session sized for a small machine.

    ``shuffle_partitions`` defaults to twice the local cores (the job raises it for big histories).

    An already running session is reused as it is (tests share one); ``master`` and the memory
    setting only apply when a new JVM is started.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    if (master or DEFAULT_MASTER).startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup warning
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 2 * (os.cpu_count() or 1)))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        # collect_list groups of the order checks: stay hash-based well past the default 128 groups
        .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "65536")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Silence log4j chatter before the first line is printed.
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.rootLogger.level=error -Dlog4j.rootLevel=error")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
