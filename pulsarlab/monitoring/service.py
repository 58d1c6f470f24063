"""Monitoring for a deployment, as the commands use it (through the deployment contract only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pulsarlab.deployment import Endpoints
from pulsarlab.monitoring import grafana
from pulsarlab.monitoring.prometheus import DEFAULT_PORT, Prometheus, PrometheusTarget

__all__ = ["DEFAULT_PORT", "MonitoringStatus", "Started", "start", "status", "stop", "url"]
TARGETS_TIMEOUT_S = 60


@dataclass
class Started:
    url: str
    pid: int
    targets: list[PrometheusTarget]
    grafana: str  # the Grafana provisioning folder (datasources/, dashboards/)


@dataclass
class MonitoringStatus:
    url: str | None
    targets: list[PrometheusTarget] = field(default_factory=list)


def prometheus(cluster: Endpoints, port: int = DEFAULT_PORT) -> Prometheus:
    rec = Prometheus(cluster.topo, cluster.state_dir).record()
    return Prometheus(cluster.topo, cluster.state_dir, port=rec.port if rec else port)


def start(cluster: Endpoints, port: int = DEFAULT_PORT) -> Started:
    """Start (or reload) Prometheus, write Grafana's provisioning beside it, and wait for every target up."""
    prom = prometheus(cluster, port)
    rec = prom.start()
    prom.wait()
    targets = prom.wait_targets_up(TARGETS_TIMEOUT_S)
    out = prom.dir / "grafana"
    grafana.write_provisioning(out, prom.url)
    cluster.say(f"Prometheus {prom.url}: every node's target is up")
    return Started(url=prom.url, pid=rec.process.pid, targets=targets, grafana=str(out))


def url(cluster: Endpoints) -> str | None:
    """Prometheus's URL while it runs, else None."""
    rec = prometheus(cluster).running()
    return rec.url if rec else None


def status(cluster: Endpoints) -> MonitoringStatus:
    prom = prometheus(cluster)
    if prom.running() is None:
        return MonitoringStatus(url=None)
    return MonitoringStatus(url=prom.url, targets=prom.targets())


def stop(cluster: Endpoints, clean: bool = False) -> bool:
    """Stop Prometheus (and remove its data with ``clean``); True if it was running."""
    prom = prometheus(cluster)
    was = prom.running() is not None
    prom.clean() if clean else prom.stop()
    return was
