"""Prometheus for a real geo deployment: every node scraped, every dashboard query answered by
metrics the nodes really export, a frozen node reported down, and start/stop safe to repeat."""

from __future__ import annotations

import json
import time

import pulsar
import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.monitoring.grafana import queried_metrics
from pulsarlab.monitoring.prometheus import Prometheus
from pulsarlab.runtime.local import LocalCluster
from tests.eventually import eventually

pytestmark = pytest.mark.cluster
EU, US = "cluster-eu", "cluster-us"
runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, list(args))


def replicated_traffic(geo: LocalCluster) -> None:
    """Messages produced on eu, which replicates them to us."""
    client = pulsar.Client(geo.service_url(EU))
    try:
        producer = client.create_producer(f"persistent://world/global/monitoring-{int(time.time())}")
        for i in range(300):
            producer.send(f"m{i}".encode())
    finally:
        client.close()


def test_prometheus_scrapes_every_node_and_the_dashboards_read_exported_metrics(geo: LocalCluster) -> None:
    sd = str(geo.state_dir)
    r = cli("monitoring", "up", "--state-dir", sd, "--json")
    assert r.exit_code == 0, r.output
    started = json.loads(r.stdout)
    assert sorted(t["node"] for t in started["targets"] if t["health"] == "up") == sorted(n.name for n in geo.topo.nodes)
    try:
        status = json.loads(cli("status", "--state-dir", sd, "--json").stdout)
        assert status["prometheus_url"] == started["url"]

        replicated_traffic(geo)
        prom = Prometheus(geo.topo, geo.state_dir)
        wanted = queried_metrics()

        def all_exported() -> None:
            missing = wanted - prom.metric_names()
            assert not missing, f"dashboard queries name metrics no node exported: {sorted(missing)}"

        eventually(all_exported, timeout=90, interval=2, what="every metric the dashboards query exported")

        # a frozen bookie stops answering its scrape: reported down by name, exit 1 (unhealthy)
        geo.pause_node("bk2-us")
        try:

            def bk2_down() -> tuple[int, dict[str, str], str]:
                r = cli("monitoring", "status", "--state-dir", sd, "--json")
                health = {t["node"]: t["health"] for t in json.loads(r.stdout)["targets"]}
                assert health["bk2-us"] == "down", health
                return r.exit_code, health, r.stderr

            exit_code, health, stderr = eventually(bk2_down, timeout=60, interval=1, what="the paused bk2-us reported down")
            assert exit_code == 1 and "bk2-us" in stderr
            assert {n for n, h in health.items() if h != "up"} == {"bk2-us"}
        finally:
            geo.resume_node("bk2-us")

        # `up --monitoring` on the running cluster: nothing restarts, Prometheus is reloaded in place
        again = cli("up", "--topology", str(geo.state_dir / "topology.yaml"), "--state-dir", sd, "--monitoring")
        assert again.exit_code == 0, again.output
        assert f"Prometheus: {started['url']}" in again.output and "already running" in again.output
        assert prom.record().process.pid == started["pid"]
    finally:
        stop = cli("monitoring", "down", "--state-dir", sd)
    assert stop.exit_code == 0 and "stopped" in stop.output
    assert json.loads(cli("status", "--state-dir", sd, "--json").stdout)["prometheus_url"] is None
    assert "nothing to stop" in cli("monitoring", "down", "--state-dir", sd).output
