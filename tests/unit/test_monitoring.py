"""Monitoring without a cluster: the scrape configuration from a topology, Grafana's provisioning,
the metric names a query reads, and a missing Prometheus named as such."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.errors import UsageError
from pulsarlab.monitoring import grafana
from pulsarlab.monitoring.prometheus import MonitoringError, Prometheus, find_binary, render_config
from pulsarlab.ops import load_topology
from pulsarlab.topology import load


def test_every_node_is_a_target_labelled_with_its_cluster_and_region() -> None:
    topo = load("sync")
    config = yaml.safe_load(render_config(topo))
    got = {}
    for job in config["scrape_configs"]:
        for sc in job["static_configs"]:
            (target,) = sc["targets"]
            got[sc["labels"]["node"]] = (job["job_name"], target, sc["labels"]["cluster"], sc["labels"]["region"])
    assert set(got) == {n.name for n in topo.nodes}
    assert got["zk"] == ("zookeeper", f"{topo.address_of(topo.node('zk'))}:8000", "", "eu")
    assert (got["bk2-us"][0], got["bk2-us"][3]) == ("bookie", "us") and got["bk2-us"][1].endswith(":8000")
    assert got["pulsar1-eu"] == ("broker", f"{topo.address_of(topo.node('pulsar1-eu'))}:8080", "mycluster", "eu")
    assert {j["job_name"]: j["metrics_path"] for j in config["scrape_configs"]} == {
        "zookeeper": "/metrics", "bookie": "/metrics", "broker": "/metrics/"}


def test_promtool_accepts_the_rendered_configuration(tmp_path: Path) -> None:
    assert shutil.which("promtool"), "promtool is missing: it comes with Prometheus (apt-get install prometheus)"
    for name in ("smoke", "sync", "geo", "active-active"):
        path = tmp_path / f"{name}.yml"
        path.write_text(render_config(load(name)))
        done = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_secure_topologys_brokers_are_scraped_over_tls_against_the_cluster_ca(tmp_path: Path) -> None:
    topo = load_topology("geo", secure=True)
    ca = tmp_path / "security" / "ca.pem"
    path = tmp_path / "prometheus.yml"
    path.write_text(render_config(topo, ca_file=ca))
    jobs = {j["job_name"]: j for j in yaml.safe_load(path.read_text())["scrape_configs"]}
    assert (jobs["broker"]["scheme"], jobs["broker"]["tls_config"]) == ("https", {"ca_file": str(ca)})
    assert all("scheme" not in jobs[j] and "tls_config" not in jobs[j] for j in ("zookeeper", "bookie"))
    # promtool checks the CA file exists: a real PEM is not needed to validate the configuration's shape
    ca.parent.mkdir()
    ca.write_text("")
    done = subprocess.run(["promtool", "check", "config", "--syntax-only", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    with pytest.raises(UsageError, match="TLS only.*CA file"):
        render_config(topo)


def test_prometheus_listens_beside_the_nodes_on_an_address_no_node_takes() -> None:
    for name in ("smoke", "sync", "geo", "active-active"):
        topo = load(name)
        prom = Prometheus(topo, Path("/nonexistent"))
        assert prom.address == f"{topo.address_prefix}.0.9"
        assert prom.address not in {topo.address_of(n) for n in topo.nodes}


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (node, region) (rate(bookkeeper_server_ADD_ENTRY_count{success="true"}[1m]))',
     {"bookkeeper_server_ADD_ENTRY_count"}),
    ("sum by (node) (rate(a_sum[1m])) / sum by (node) (rate(a_count[1m]))", {"a_sum", "a_count"}),
    ("max by (cluster, remote_cluster) (pulsar_replication_delay_in_seconds)", {"pulsar_replication_delay_in_seconds"}),
    ('pulsar_rate_in{namespace=~"world/.*"}', {"pulsar_rate_in"}),
])
def test_the_metric_names_a_query_reads(expr: str, names: set[str]) -> None:
    assert grafana.metric_names(expr) == names


def test_grafana_provisioning_is_a_datasource_and_dashboards_that_use_it(tmp_path: Path) -> None:
    files = grafana.write_provisioning(tmp_path, "http://127.0.0.9:9090", dashboards_path="/var/lib/dashboards")
    assert {p.relative_to(tmp_path).as_posix() for p in files} == {
        "datasources/prometheus.yaml", "dashboards/pulsarlab.yaml",
        "dashboards/json/pulsarlab-bookies.json", "dashboards/json/pulsarlab-brokers.json"}
    (ds,) = yaml.safe_load((tmp_path / "datasources/prometheus.yaml").read_text())["datasources"]
    assert (ds["type"], ds["url"], ds["uid"]) == ("prometheus", "http://127.0.0.9:9090", grafana.DATASOURCE_UID)
    (provider,) = yaml.safe_load((tmp_path / "dashboards/pulsarlab.yaml").read_text())["providers"]
    assert provider["options"]["path"] == "/var/lib/dashboards"
    for path in (tmp_path / "dashboards/json").iterdir():
        board = json.loads(path.read_text())
        assert board["uid"] == path.stem and board["panels"]
        ids = [p["id"] for p in board["panels"]]
        assert len(set(ids)) == len(ids)
        for panel in board["panels"]:
            (target,) = panel["targets"]
            assert panel["datasource"]["uid"] == target["datasource"]["uid"] == grafana.DATASOURCE_UID
            assert grafana.metric_names(target["expr"]), panel["title"]
    bookies = json.loads((tmp_path / "dashboards/json/pulsarlab-bookies.json").read_text())
    # the blog's view: entries written and read, per bookie and per region
    assert {"Entries written per region", "Entries read per region", "Entries written per bookie"} <= {
        p["title"] for p in bookies["panels"]}


def test_a_missing_prometheus_is_one_error_that_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PULSARLAB_PROMETHEUS", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(MonitoringError, match="Prometheus is not installed: install it .*apt-get install prometheus"):
        find_binary()


def test_monitoring_commands_without_a_cluster_fail_in_one_line(tmp_path: Path) -> None:
    for cmd in ("up", "status", "down"):
        r = CliRunner().invoke(app, ["monitoring", cmd, "--state-dir", str(tmp_path / "none")])
        assert r.exit_code in (1, 2) and "Traceback" not in r.output, r.output
