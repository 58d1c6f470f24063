"""The ``geo`` topology on real Pulsar: two clusters sharing a configuration store, configured over
REST, a recorded workload produced on one and consumed on the other, replication proven by the verifier."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab import ops
from pulsarlab.admin import reconcile, replication
from pulsarlab.admin.client import AdminClient
from pulsarlab.cli import app
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.workload.manifest import read_manifest
from pulsarlab.workload.run import WorkloadConfig

pytestmark = pytest.mark.cluster
EU, US = "cluster-eu", "cluster-us"


def test_geo_comes_up_configured_and_a_second_configure_changes_nothing(geo: LocalCluster) -> None:
    topo = geo.topo
    for side in (EU, US):  # one configuration store: each cluster sees the same registrations
        admin = AdminClient(geo.admin_url(side))
        for c in (EU, US):
            data = admin.cluster_data(c)
            assert data is not None, f"{c} not registered as seen from {side}"
            assert (data["serviceUrl"], data["brokerServiceUrl"]) == (topo.registered_web_url(c), topo.service_url(c))
        assert sorted(admin.tenant("world")["allowedClusters"]) == [EU, US]
        assert sorted(admin.namespace_policies("world/global")["replication_clusters"]) == [EU, US]
    again = reconcile.configure(geo)
    assert again.changes == [] and again.restarted == []


def test_a_drifted_registration_is_put_back(geo: LocalCluster) -> None:
    admin = AdminClient(geo.admin_url(EU))
    want = geo.topo.registered_web_url(US)
    admin.put_cluster(US, {**admin.cluster_data(US), "serviceUrl": "http://127.0.2.3:8080"}, create=False)
    fixed = reconcile.configure(geo)
    assert [(c.object, c.field, c.desired) for c in fixed.changes] == [(f"cluster {US}", "serviceUrl", want)]
    assert AdminClient(geo.admin_url(US)).cluster_data(US)["serviceUrl"] == want
    assert reconcile.configure(geo).changes == []


def test_produced_on_eu_consumed_on_us_and_verified_replicated(geo: LocalCluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = WorkloadConfig("", producers=2, consumers=1, rate=300, duration=5)
    result = ops.workload_run(geo.state_dir, cfg, out, EU, consume_cluster=US)
    assert [(d.name, d.reason) for d in result.failed] == [] and result.counters.acked > 1000
    manifest = read_manifest(out)
    assert manifest is not None and (manifest.cluster, manifest.consume_cluster) == (EU, US)
    assert manifest.replication == {cfg.topic: [EU, US]} and sorted(manifest.read_clusters) == [EU, US]

    verdict = ops.verify_history([out])
    assert verdict.status == "pass", (verdict.reasons, verdict.counts())
    counts = verdict.metrics["messages"]
    assert verdict.check("not_replicated").count == 0
    assert counts["acknowledged"] == result.counters.acked and counts["delivered"] == counts["acknowledged"]
    # every message was acknowledged on eu and first received on us: each has a replication delay there
    delay = verdict.metrics["replication_delay_ms"]
    assert list(delay) == [US] and delay[US]["count"] == counts["delivered"], delay
    assert 0 < delay[US]["p50"] <= delay[US]["p99"] <= delay[US]["max"], delay

    report = replication.inspect(geo, cfg.topic)
    [eu_to_us] = [d for d in report.directions if d.source == EU]
    assert (eu_to_us.destination, eu_to_us.connected, eu_to_us.backlog) == (US, True, 0), report.to_dict()
    shown = CliRunner().invoke(app, ["inspect", "replication", "--topic", cfg.topic, "--json", "--state-dir", str(geo.state_dir)])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["directions"]
    assert {(d["source"], d["destination"], d["backlog"]) for d in rows if d["source"] == EU} == {(EU, US, 0)}
