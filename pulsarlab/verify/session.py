"""One place that creates the Spark session the verifier runs in."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import psutil

from pulsarlab import timeouts
from pulsarlab.classdata import JVM_LOG_ON_STDERR, ClassArchives

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
GIB = 1 << 30
SPARK_LOG_NAME = "spark.log"
_spark_log: Path | None = None  # where the running session's JVM writes its stderr
DRIVER = "driver"  # the kind of JVM whose classes are archived (pulsarlab.classdata)
DAEMON_MODULE = "pulsarlab.verify.pydaemon"
SPARK_DAEMON_MODULE = "pyspark.daemon"  # Spark's default
ARCHIVE_WAIT_S = 60.0  # for the recording driver JVM to write its class archive at exit (scaled)


def spark_log() -> Path | None:
    """The file the running Spark JVM writes its log to (None before a session started here)."""
    return _spark_log


def _launch_driver(options: dict[str, str], log: Path) -> None:
    """Start the driver JVM with its stderr (and its Python workers') appended to ``log``.

    PySpark would start it on this process's stderr, the user's terminal; starting it here hands
    the file to that one process, so nothing of this process is redirected meanwhile (another
    thread may be showing progress on stderr: :func:`pulsarlab.verify.verify` starts Spark while it
    reads the history)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    conf = SparkConf()
    for key, value in options.items():
        conf.set(key, value)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as err:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": err})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)  # the context made next uses this JVM


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


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


def spark_java() -> Path | None:
    """The Java executable ``spark-submit`` runs (``$JAVA_HOME/bin/java``, else ``java`` on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found) if found and Path(found).is_file() else None


def driver_archives() -> ClassArchives | None:
    """Where the driver JVM's class archive is kept for this Spark and JDK (None without a Java)."""
    java = spark_java()
    if java is None:
        return None
    import pyspark

    return ClassArchives.for_java(f"spark-{pyspark.__version__}", Path(pyspark.__file__).parent, java)


def driver_java_options(quick_jit: bool, archives: ClassArchives | None, recording: Path | None) -> str:
    """The driver JVM's options: warnings only from log4j's first line and the JVM's own log on
    stderr (it defaults to stdout, which is the user's: ``verify --json``), C1 alone when
    ``quick_jit``, and the driver's class archive mapped, or recorded at ``recording`` while
    there is none."""
    opts = ["-Dlog4j2.rootLogger.level=warn", "-Dlog4j.rootLevel=warn", *JVM_LOG_ON_STDERR]
    if quick_jit:
        opts.append("-XX:TieredStopAtLevel=1")
    if archives is not None and (sharing := archives.jvm_options(DRIVER, recording)):
        opts.append(sharing)
    return " ".join(opts)


def _keep_recording(archives: ClassArchives, recording: Path) -> None:
    """At this process's exit: stop Spark, end the driver JVM as PySpark does (its stdin closed,
    it exits by itself) and wait, bounded, for it to write the class archive it recorded; the
    archive is kept only from a clean exit. Once per machine, Spark install and JDK; said on
    stderr when it is a terminal."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    rc = None
    if proc is not None:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if sys.stderr.isatty():  # said where a person waits; a script's stderr stays its own
            print(f"pulsarlab: writing the Spark driver's class archive (once; later verifies start faster): "
                  f"{recording}", file=sys.stderr)
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            rc = proc.wait(timeout=ARCHIVE_WAIT_S * timeouts.scale())
        except (OSError, subprocess.TimeoutExpired):
            rc = None  # not waited for longer: a later process records again
    archives.settle(DRIVER, recording, rc == 0)


def spark_session(
    master: str | None = None,
    *,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    executor_python: str | None = None,
    app_name: str = "pulsarlab-verify",
    log_file: Path | None = None,
    quick_jit: bool = True,
) -> SparkSession:
    """Get (or create) a quiet Spark session sized for a small machine.

    ``shuffle_partitions`` defaults to twice the local cores (the job raises it for big histories);
    ``driver_memory`` to :func:`default_driver_memory`. Python workers run ``executor_python``,
    by default this very interpreter (not whatever ``python3`` is on PATH, which may lack pyarrow);
    on a cluster the path must exist on every executor's host.

    An already running session is reused when ``master`` is not given or is its master; one with
    another master is stopped first (a new master never silently runs on the old one), and so is a
    local one whose workers run pulsarlab's daemon (:mod:`.pydaemon`) when another interpreter is
    asked for. The memory setting only applies when a new JVM is started.

    A new JVM runs with :func:`driver_java_options` (``quick_jit``: C1 alone; bench/verify_jit.py
    measured it cheaper at every history size, 150,000 to 50 million rows).
    It writes its stderr (Spark's log4j output, the JVM's warnings) to ``log_file``
    (default ``$TMPDIR/pulsarlab-spark.log``), never to the terminal: :func:`spark_log` names it.
    """
    global _spark_log
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    python = executor_python or sys.executable
    running = SparkContext._active_spark_context
    if running is not None:
        # a session whose workers run pulsarlab's daemon needs this interpreter (pulsarlab installed)
        ours = running.getConf().get("spark.python.daemon.module") == DAEMON_MODULE
        if (master is None or running.master == master) and (not ours or _same_file(python, sys.executable)):
            running.pythonExec = python  # read whenever a Python function is shipped to the workers
            return SparkSession.builder.getOrCreate()
        master = master or running.master
        active = SparkSession.getActiveSession()
        (active or running).stop()
    own_daemon = (master or DEFAULT_MASTER).startswith("local") and _same_file(python, sys.executable)
    if _on_loopback(master or DEFAULT_MASTER):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no hostname lookup; executors reach the driver there
    # The Python side reads PYSPARK_PYTHON when the context starts and sends that path with every
    # Python function; the spark.pyspark.* settings only matter to spark-submit, set for the record.
    os.environ["PYSPARK_PYTHON"] = python
    archives, recording = driver_archives(), None
    if archives is not None and not archives.archive(DRIVER).is_file() and SparkContext._gateway is None:
        # this process starts the first driver JVM here: it records, and its exit keeps the archive
        recording = archives.recording(DRIVER, f"pid{os.getpid()}")
        atexit.register(_keep_recording, archives, recording)
    options = {
        "spark.master": master or DEFAULT_MASTER,
        "spark.app.name": app_name,
        "spark.driver.memory": driver_memory or default_driver_memory(),
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.shuffle.partitions": str(shuffle_partitions or 2 * (os.cpu_count() or 1)),
        "spark.sql.adaptive.enabled": "true",
        "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
        # what the job exchanges is Arrow blobs its tasks compressed already: compressing them again
        # cost 5 s of 42 at 10 million messages (bench/verify_scale.py)
        "spark.shuffle.compress": "false",
        # collect_list groups of the order checks: stay hash-based well past the default 128 groups
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "65536",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.hadoop.parquet.page.verify-checksum.enabled": "true",  # a damaged page is an error, not data
        "spark.driver.extraJavaOptions": driver_java_options(quick_jit, archives, recording),
    }
    # the executors are this machine's and run this interpreter, pulsarlab installed: their Python
    # daemon imports the installed PySpark, not the zip Spark puts first on their path (pydaemon.py).
    # Else Spark's own, named: a context made in a JVM started earlier inherits the JVM's setting
    options["spark.python.daemon.module"] = DAEMON_MODULE if own_daemon else SPARK_DAEMON_MODULE
    log = log_file or Path(tempfile.gettempdir()) / "pulsarlab-spark.log"
    if SparkContext._gateway is None:
        _launch_driver(options, log)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # into the log file: warnings help when a run goes wrong
    _spark_log = log
    return spark
