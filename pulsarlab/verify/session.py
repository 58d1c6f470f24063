"""One place that creates the Spark session the verifier runs in."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psutil

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
GIB = 1 << 30
SPARK_LOG_NAME = "spark.log"
_spark_log: Path | None = None  # where the running session's JVM writes its stderr


def spark_log() -> Path | None:
    """The file the running Spark JVM writes its log to (None before a session started here)."""
    return _spark_log


@contextlib.contextmanager
def _stderr_into(path: Path) -> Iterator[None]:
    """Processes started in the block inherit ``path`` as their stderr (file descriptor 2); this
    process gets its own stderr back at the end. The Spark JVM is such a process: its log4j
    console output and the JVM's own warnings go to the file for its whole life."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def default_driver_memory(total_bytes: int | None = None) -> str:
    """A quarter of the machine's memory, between 1 and 8 GiB, as a Spark size (``"6g"``)."""
    total = psutil.virtual_memory().total if total_bytes is None else total_bytes
    return f"{min(8, max(1, total // 4 // GIB))}g"


def _on_loopback(master: str) -> bool:
    """Local mode, or a cluster master on this machine's loopback (``spark://127.0.0.1:7077``)."""
    if master.startswith("local"):
        return True
    host = urlsplit(master).hostname or ""
    return host == "localhost" or host.startswith("127.")


def spark_session(
    master: str | None = None,
    *,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    executor_python: str | None = None,
    app_name: str = "pulsarlab-verify",
    log_file: Path | None = None,
) -> SparkSession:
    """Get (or create) a quiet Spark session sized for a small machine.

    ``shuffle_partitions`` defaults to twice the local cores (the job raises it for big histories);
    ``driver_memory`` to :func:`default_driver_memory`. Python workers run ``executor_python``,
    by default this very interpreter (not whatever ``python3`` is on PATH, which may lack pyarrow);
    on a cluster the path must exist on every executor's host.

    An already running session is reused when ``master`` is not given or is its master; one with
    another master is stopped first (a new master never silently runs on the old one). The memory
    setting only applies when a new JVM is started.

    A new JVM writes its stderr (Spark's log4j output, the JVM's warnings) to ``log_file``
    (default ``$TMPDIR/pulsarlab-spark.log``), never to the terminal: :func:`spark_log` names it.
    """
    global _spark_log
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    python = executor_python or sys.executable
    running = SparkContext._active_spark_context
    if running is not None:
        if master is None or running.master == master:
            running.pythonExec = python  # read whenever a Python function is shipped to the workers
            return SparkSession.builder.getOrCreate()
        active = SparkSession.getActiveSession()
        (active or running).stop()
    if _on_loopback(master or DEFAULT_MASTER):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup; executors reach the driver there
    # The Python side reads PYSPARK_PYTHON when the context starts and sends that path with every
    # Python function; the spark.pyspark.* settings only matter to spark-submit, set for the record.
    os.environ["PYSPARK_PYTHON"] = python
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .appName(app_name)
        .config("spark.driver.memory", driver_memory or default_driver_memory())
        .config("spark.pyspark.python", python)
        .config("spark.pyspark.driver.python", sys.executable)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 2 * (os.cpu_count() or 1)))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        # collect_list groups of the order checks: stay hash-based well past the default 128 groups
        .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "65536")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.hadoop.parquet.page.verify-checksum.enabled", "true")  # a damaged page is an error, not data
        # log4j from the first line at warn (into the log file, see _stderr_into)
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.rootLogger.level=warn -Dlog4j.rootLevel=warn")
    )
    log = log_file or Path(tempfile.gettempdir()) / "pulsarlab-spark.log"
    with _stderr_into(log):
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")  # into the log file: warnings help when a run goes wrong
    _spark_log = log
    return spark
