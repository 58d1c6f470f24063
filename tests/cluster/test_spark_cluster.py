"""`pulsarlab verify --master spark://...` on a real Spark standalone cluster (a master and a
worker started from the installed PySpark's jars, the worker in a folder of its own) gives the
verdict a local Spark gives. One worker: the executors still run in another process and another
working directory than the driver's, and on two cores a second one only made every run slower."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from pulsarlab.verify import VERDICT_FILE, verify
from pulsarlab.verify.standalone import StandaloneCluster
from tests.cluster.handmade import handmade_history

REPO = Path(__file__).resolve().parents[2]
VERIFY_TIMEOUT = 300


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    started = time.monotonic()
    with StandaloneCluster(workers=1, root=tmp_path_factory.mktemp("spark")) as cluster:
        print(f"standalone cluster ready in {time.monotonic() - started:.1f} s")
        yield cluster


def verify_cli(directory: Path, master: str, given: str | None = None, cwd: Path = REPO) -> tuple[int, dict[str, Any]]:
    """Run the CLI in its own process (a fresh Spark session on exactly this master), from ``cwd``,
    naming the history ``given`` (a relative path, a URI; default: its absolute path); its verdict.json."""
    (directory / VERDICT_FILE).unlink(missing_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pulsarlab.cli", "verify", "--json", "--master", master, "--driver-memory", "1g",
         given or str(directory)],
        cwd=cwd, capture_output=True, text=True, timeout=VERIFY_TIMEOUT,
    )
    print(f"verify {given or directory.name} on {master}: {time.monotonic() - started:.1f} s")
    verdict = directory / VERDICT_FILE
    assert done.returncode in (0, 1) and verdict.exists(), done.stdout[-3000:] + done.stderr[-5000:]
    return done.returncode, json.loads(verdict.read_text())


def judged(verdict: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on where Spark ran: the outcome, every check, every metric."""
    return {k: v for k, v in verdict.items() if k not in {"seconds", "directory", "directories"}}


def test_standalone_cluster_gives_the_local_verdict(spark_cluster: StandaloneCluster, tmp_path: Path) -> None:
    """A clean history by its absolute path (a lossy one: the next test, by a relative path and a URI)."""
    history = handmade_history(tmp_path / "run", messages=60)
    # the local verdict from this process's Spark session (started once for the whole test run)
    local_rc = verify(history).exit_code
    local = json.loads((history / VERDICT_FILE).read_text())
    before = {app["id"] for app in spark_cluster.state()["completedapps"]}
    cluster_rc, remote = verify_cli(history, spark_cluster.master_url)

    assert (local_rc, cluster_rc) == (0, 0)
    assert judged(remote) == judged(local)
    assert next(c for c in remote["checks"] if c["name"] == "lost")["count"] == 0

    # It really ran there: the master saw the application finish, and its workers ran executors.
    apps = [a for a in spark_cluster.state()["completedapps"] if a["id"] not in before]
    assert [a["name"] for a in apps] == ["pulsarlab-verify"], apps
    executor_logs = list(spark_cluster.root.glob(f"worker-*/{apps[0]['id']}/*/stderr"))
    assert len(executor_logs) == 1, executor_logs  # the worker's one executor, with its single core


def test_a_relative_folder_and_a_file_uri_give_the_local_verdict(spark_cluster: StandaloneCluster, tmp_path: Path) -> None:
    """The driver runs in ``tmp_path`` and is given ``runs/a``; the executors run in the workers' own
    folders (under the cluster's root, elsewhere): they open the parts by the absolute URIs the
    driver made, so the verdict is the one ``local[2]`` gives. The same for a ``file://`` URI."""
    history = handmade_history(tmp_path / "runs" / "a", messages=60, lose=13)
    local_rc = verify(history, master="local[2]").exit_code
    local = json.loads((history / VERDICT_FILE).read_text())
    assert local_rc == 1 and next(c for c in local["checks"] if c["name"] == "lost")["count"] == 1
    assert spark_cluster.root is not None and tmp_path not in spark_cluster.root.parents

    before = {app["id"] for app in spark_cluster.state()["completedapps"]}
    for given in ("runs/a", history.as_uri()):
        rc, remote = verify_cli(history, spark_cluster.master_url, given=given, cwd=tmp_path)
        assert (rc, judged(remote)) == (local_rc, judged(local)), given
    apps = [a for a in spark_cluster.state()["completedapps"] if a["id"] not in before]
    assert len(apps) == 2, apps  # both ran on the cluster, not in a local fallback
    for a in apps:  # the worker's one executor, with its single core
        assert len(list(spark_cluster.root.glob(f"worker-*/{a['id']}/*/stderr"))) == 1, a
    # the executors' working directories: the workers' own, not the driver's
    executor_dirs = [p.parent for a in apps for p in spark_cluster.root.glob(f"worker-*/{a['id']}/*/stderr")]
    assert executor_dirs and not [d for d in executor_dirs if d == tmp_path or tmp_path in d.parents]


def test_stop_ends_every_process_it_started(spark_cluster: StandaloneCluster) -> None:
    """Last in the module: the cluster that served the verifies above (its executors ended with their
    applications), stopped; a second stop, the fixture's, does nothing."""
    pids = [d.proc.pid for d in spark_cluster.daemons]
    assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
    spark_cluster.stop()
    assert spark_cluster.daemons == []
    assert not [p for p in pids if psutil.pid_exists(p)]
