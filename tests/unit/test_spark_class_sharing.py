"""The verifier's Spark driver starts from a class archive: the first process on a machine records
it and keeps it when its JVM exits cleanly; every later driver JVM maps it. Real Spark JVMs, each
in a process of its own with a cache folder of the test's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pulsarlab.classdata import ClassArchives
from pulsarlab.verify.session import driver_java_options

# a process that starts the verifier's Spark session, says its JVM's pid and whether that JVM maps
# the driver archive (the JDK maps its own classes.jsa too), and exits as `pulsarlab verify` does
SESSION = textwrap.dedent("""
    from pyspark import SparkContext
    from pulsarlab.verify.session import spark_session
    spark_session("local[1]", shuffle_partitions=1, driver_memory="1g", quick_jit=True).range(3).count()
    pid = SparkContext._gateway.proc.pid
    maps = open(f"/proc/{pid}/maps").read()
    print(pid, "mapped" if "/driver.jsa" in maps else "not-mapped", flush=True)
""")


def _session(cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SESSION], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PULSARLAB_CACHE": str(cache)})


def test_first_driver_records_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    first = _session(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.split()[1] == "not-mapped"  # nothing to map yet: this JVM records
    assert len(first.stdout.splitlines()) == 1, first.stdout[-2000:]  # the JVM's dump says nothing on stdout
    [archive] = list((tmp_path / "cds").glob("spark-*/driver.jsa"))  # written at its exit, then promoted
    assert archive.stat().st_size > 10 << 20
    assert "class archive" not in first.stderr  # said on a terminal only: a script's stderr stays its own
    assert not list(archive.parent.glob("*.part"))

    second = _session(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.split()[1] == "mapped"


def test_quick_jit_is_c1_alone_and_the_archive_is_mapped_or_recorded(tmp_path: Path) -> None:
    archives = ClassArchives(tmp_path)
    part = archives.recording("driver", "pid1")
    quick, full = driver_java_options(True, archives, part).split(), driver_java_options(False, None, None).split()
    assert "-XX:TieredStopAtLevel=1" in quick and "-XX:TieredStopAtLevel=1" not in full
    assert "-Dlog4j2.rootLogger.level=warn" in quick and "-Dlog4j2.rootLogger.level=warn" in full
    assert f"-XX:ArchiveClassesAtExit={part}" in quick
    archives.archive("driver").write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={archives.archive('driver')}" in driver_java_options(False, archives, None).split()
