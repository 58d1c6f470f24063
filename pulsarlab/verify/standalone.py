"""A Spark standalone cluster on this machine, from the installed PySpark's own jars (no Spark download).

One master and a few workers, each a JVM on 127.0.0.1 with free ports and a small heap; every process
started is stopped by its pid (and the process group it leads, so executors go too)::

    with StandaloneCluster(workers=2) as cluster:
        verify(run_dir, master=cluster.master_url)

``python -m pulsarlab.verify.standalone`` keeps one up until interrupted and prints its URL.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulsarlab import settings, timeouts

HOST = "127.0.0.1"
DAEMON_HEAP = "256m"
STOP_TIMEOUT = 15.0


def spark_home() -> Path:
    """The installed PySpark's folder: it holds ``jars/`` and serves as SPARK_HOME for executors."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def scala_version(home: Path) -> str:
    """Scala version of the jars (``spark-core_2.13-4.0.0.jar``): a worker's executor command needs it
    outside a Spark build tree, as bin/load-spark-env.sh would export it."""
    core = next(home.glob("jars/spark-core_*.jar"), None)
    if core is None:
        raise RuntimeError(f"no spark-core jar in {home / 'jars'}: is PySpark installed with its jars?")
    return core.name.split("_", 1)[1].split("-", 1)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


@dataclass
class StandaloneCluster:
    """Master and ``workers`` workers of ``cores`` cores and ``memory`` each, on loopback."""

    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    root: Path | None = None
    master_port: int = 0
    webui_port: int = 0
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def state(self) -> dict[str, Any]:
        """The master's own JSON view: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as r:
            doc: dict[str, Any] = json.load(r)
            return doc

    def start(self) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker is registered ALIVE."""
        self.root = Path(self.root or tempfile.mkdtemp(prefix="pulsarlab-spark-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port, self.webui_port = free_port(), free_port()
        try:
            self._spawn("master", "org.apache.spark.deploy.master.Master",
                        "--host", HOST, "--port", str(self.master_port), "--webui-port", str(self.webui_port))
            self._await("master web UI", lambda: self.state() is not None, self.daemons[0])
            for i in range(self.workers):
                work = self.root / f"worker-{i}"
                work.mkdir(parents=True, exist_ok=True)
                self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                            "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                            "--webui-port", str(free_port()), "--work-dir", str(work))
            self._await(f"{self.workers} workers ALIVE at {self.master_url}",
                        lambda: sum(w["state"] == "ALIVE" for w in self.state()["workers"]) >= self.workers,
                        *self.daemons[1:])
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, main: str, *args: str) -> None:
        home = spark_home()
        java_home = settings.current().java_home
        java = str(java_home / "bin" / "java") if java_home else shutil.which("java")
        if not java:
            raise RuntimeError("no java on PATH or in JAVA_HOME: Spark's master and workers are JVMs")
        assert self.root is not None
        log = self.root / f"{name}.log"
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_SCALA_VERSION": scala_version(home)}
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [java, f"-Xmx{DAEMON_HEAP}", "-cp", f"{home / 'jars'}/*", main, *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.root,
                start_new_session=True,  # its own process group: executors it forks stop with it
            )
        self.daemons.append(Daemon(name, proc, log))

    def _await(self, what: str, ready, *watched: Daemon) -> None:  # type: ignore[no-untyped-def]
        timeout = timeouts.timeout("spark")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in watched:
                if d.proc.poll() is not None:
                    raise RuntimeError(f"Spark {d.name} exited with {d.proc.returncode} while awaiting {what}; "
                                       f"last lines of {d.log}:\n{_tail(d.log)}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                if ready():
                    return
            time.sleep(0.3)
        logs = "\n".join(f"--- {d.log}\n{_tail(d.log)}" for d in watched)
        raise TimeoutError(f"Spark standalone: {what} not reached within {timeout:.0f} s\n{logs}")

    def stop(self) -> None:
        """Stop every process started here, workers first: SIGTERM to its group, SIGKILL after a grace."""
        for d in reversed(self.daemons):
            if d.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(d.proc.pid, signal.SIGTERM)
            try:
                d.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(d.proc.pid, signal.SIGKILL)
                d.proc.wait(timeout=STOP_TIMEOUT)
            with contextlib.suppress(ProcessLookupError):  # executors left in the group after their worker
                os.killpg(d.proc.pid, signal.SIGKILL)
        self.daemons.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):  # also when started in the background, where SIGINT is ignored
        signal.signal(sig, _interrupt)
    with StandaloneCluster() as cluster:
        print(f"Spark standalone master {cluster.master_url} (web UI {cluster.webui_url}, logs in {cluster.root}); "
              "Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()
