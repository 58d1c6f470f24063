"""A Prometheus server for one deployment, run as a local process from the installed binary
(Debian's ``prometheus`` package, or any ``prometheus`` on PATH).

Like a node it has start / wait / stop / clean and declares its log file. Its configuration, data,
log and process record live under ``<state>/monitoring/``; it listens on ``<prefix>.0.9:9090``,
an address no node of the topology takes (nodes are numbered from region 1).
"""

from __future__ import annotations

import errno
import json
import shutil
import socket
import subprocess
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import requests

from pulsarlab import settings
from pulsarlab.errors import PulsarlabError, UsageError
from pulsarlab.monitoring.ports import DEFAULT_PORT
from pulsarlab.monitoring.targets import scrape_targets
from pulsarlab.render import template_env
from pulsarlab.runtime.state import ProcessRecord
from pulsarlab.runtime.waits import wait_for
from pulsarlab.security.files import files_of
from pulsarlab.topology import Topology

SCRAPE_INTERVAL_S = 5
READY_TIMEOUT_S = 60
INSTALL_HINT = ("install it (Debian/Ubuntu: apt-get install prometheus; the service it installs need not run) "
                "or put a prometheus binary on PATH")


class MonitoringError(PulsarlabError):
    """Prometheus is missing, could not start, or does not answer."""


@dataclass
class PrometheusTarget:
    """One scrape target as Prometheus reports it."""

    job: str
    node: str
    instance: str
    health: str  # up | down | unknown
    last_error: str
    scrape_url: str = ""


@dataclass
class PrometheusRecord:
    """What ``<state>/monitoring/prometheus.json`` keeps of a running Prometheus."""

    url: str
    address: str
    port: int
    binary: str
    process: ProcessRecord


def default_address(topo: Topology) -> str:
    return f"{topo.address_prefix}.0.9"


def render_config(topo: Topology, interval: int = SCRAPE_INTERVAL_S, ca_file: Path | None = None) -> str:
    """``prometheus.yml`` for the topology: a job per role, every node a target. A secure
    topology's brokers are scraped over TLS, their certificate checked against ``ca_file`` (their
    ``/metrics`` needs no token: ``authenticateMetricsEndpoint`` stays off)."""
    jobs: dict[str, list] = defaultdict(list)
    for t in scrape_targets(topo):
        jobs[t.job].append(t)
    if topo.tls and ca_file is None:
        raise UsageError(f"monitoring {topo.name!r}: its brokers speak TLS only; Prometheus needs the cluster's CA file")
    return template_env().get_template("prometheus.yml.j2").render(
        topo=topo, jobs=dict(jobs), interval=interval, scrape_timeout=max(1, interval - 1), ca_file=ca_file)


def find_binary() -> str:
    path = settings.current().prometheus or shutil.which("prometheus")
    if not path:
        raise MonitoringError(f"Prometheus is not installed: {INSTALL_HINT}")
    return path


class Prometheus:
    """The deployment's Prometheus process."""

    def __init__(self, topo: Topology, state_dir: Path, address: str | None = None, port: int = DEFAULT_PORT):
        self.topo = topo
        self.dir = state_dir / "monitoring"
        self.address = address or default_address(topo)
        self.port = port

    # ----- files ---------------------------------------------------------------------------------
    @property
    def config_file(self) -> Path:
        return self.dir / "prometheus.yml"

    @property
    def log_file(self) -> Path:
        return self.dir / "prometheus.log"

    @property
    def record_file(self) -> Path:
        return self.dir / "prometheus.json"

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def record(self) -> PrometheusRecord | None:
        if not self.record_file.is_file():
            return None
        data = json.loads(self.record_file.read_text())
        data["process"] = ProcessRecord(**data["process"])
        return PrometheusRecord(**data)

    def running(self) -> PrometheusRecord | None:
        rec = self.record()
        return rec if rec is not None and rec.process.alive() else None

    # ----- start / wait / stop / clean -------------------------------------------------------------
    def start(self) -> PrometheusRecord:
        """Write the configuration and start Prometheus; a running one is reloaded, not restarted."""
        binary = find_binary()
        self.dir.mkdir(parents=True, exist_ok=True)
        ca = files_of(self.dir.parent).ca_cert if self.topo.tls else None
        self.config_file.write_text(render_config(self.topo, ca_file=ca))
        rec = self.running()
        if rec is not None:
            rec.process.signal(1)  # SIGHUP: re-read prometheus.yml
            return rec
        self._check_port()
        args = [binary, f"--config.file={self.config_file}", f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address={self.address}:{self.port}", "--storage.tsdb.retention.time=2d",
                "--web.enable-lifecycle"]
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        rec = PrometheusRecord(url=self.url, address=self.address, port=self.port, binary=binary,
                               process=ProcessRecord(proc.pid, psutil.Process(proc.pid).create_time()))
        self.record_file.write_text(json.dumps(asdict(rec), indent=2))
        return rec

    def wait(self, timeout: float = READY_TIMEOUT_S) -> float:
        """Wait until Prometheus answers ``/-/ready``; the error carries its log tail."""
        rec = self.record()

        def ready() -> tuple[bool, str]:
            try:
                r = requests.get(f"{self.url}/-/ready", timeout=2)
                return r.status_code == 200, f"HTTP {r.status_code}"
            except requests.RequestException as exc:
                return False, type(exc).__name__

        return wait_for("prometheus", ready, what=f"Prometheus ready at {self.url}/-/ready", timeout=timeout,
                        log_file=self.log_file, alive=(rec.process.alive if rec else None))

    def stop(self, timeout: float = 30) -> bool:
        """Stop it by its recorded pid; True if one was running."""
        rec = self.record()
        if rec is None:
            return False
        was = rec.process.alive()
        rec.process.terminate(timeout)
        self.record_file.unlink(missing_ok=True)
        return was

    def clean(self) -> None:
        """Stop it and remove its data and configuration."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ----- what it sees ----------------------------------------------------------------------------
    def targets(self) -> list[PrometheusTarget]:
        """Every active scrape target with its health, as Prometheus reports it."""
        try:
            r = requests.get(f"{self.url}/api/v1/targets", params={"state": "active"}, timeout=5)
            r.raise_for_status()
        except requests.RequestException as exc:
            raise MonitoringError(f"Prometheus at {self.url} did not list its targets: {exc}") from exc
        return [
            PrometheusTarget(job=t["labels"].get("job", ""), node=t["labels"].get("node", ""),
                             instance=t["labels"].get("instance", ""), health=t.get("health", "unknown"),
                             last_error=t.get("lastError", ""), scrape_url=t.get("scrapeUrl", ""))
            for t in r.json()["data"]["activeTargets"]
        ]

    def wait_targets_up(self, timeout: float = 60) -> list[PrometheusTarget]:
        """Wait until every node of the topology is a target that is up."""
        want = {t.node for t in scrape_targets(self.topo)}
        seen: list[PrometheusTarget] = []

        def all_up() -> tuple[bool, str]:
            nonlocal seen
            seen = self.targets()
            down = sorted(want - {t.node for t in seen if t.health == "up"})
            return not down, "not up: " + ", ".join(
                f"{t.node} ({t.health}{': ' + t.last_error if t.last_error else ''})"
                for t in seen if t.node in down) if down else ""

        wait_for("prometheus", all_up, what="every node's scrape target up", timeout=timeout, interval=1.0,
                 log_file=self.log_file)
        return seen

    def metric_names(self) -> set[str]:
        """Every metric name Prometheus has stored."""
        try:
            r = requests.get(f"{self.url}/api/v1/label/__name__/values", timeout=10)
            r.raise_for_status()
        except requests.RequestException as exc:
            raise MonitoringError(f"Prometheus at {self.url} did not list metric names: {exc}") from exc
        return set(r.json()["data"])

    def _check_port(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.address, self.port))
            except OSError as exc:
                why = "port in use" if exc.errno == errno.EADDRINUSE else str(exc)
                raise MonitoringError(f"Prometheus cannot listen on {self.address}:{self.port}: {why} "
                                      "(choose another with --port)") from exc

