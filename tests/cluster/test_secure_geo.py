"""The secure profile on a real geo pair: TLS registrations, and a workload produced on one cluster
and consumed on the other as the workload role, replicated over TLS with the brokers' own token."""

from __future__ import annotations

from pathlib import Path

from pulsarlab import ops
from pulsarlab.admin import replication
from pulsarlab.admin.client import admin_of
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.workload.run import WorkloadConfig

EU, US = "cluster-eu", "cluster-us"


def test_secure_geo_is_registered_with_tls_urls_only(secure_geo: LocalCluster) -> None:
    topo = secure_geo.topo
    admin = admin_of(secure_geo, EU)
    for c in (EU, US):
        data = admin.cluster_data(c)
        assert data["serviceUrlTls"] == data["serviceUrl"] == topo.registered_web_url(c)
        assert data["serviceUrl"].startswith("https://")
        assert data["brokerServiceUrlTls"] == data["brokerServiceUrl"] == topo.service_url(c)
        assert data["brokerServiceUrl"].startswith("pulsar+ssl://")
    assert sorted(admin.permissions("world/global")["workload"]) == ["consume", "produce"]


def test_secure_geo_replicates_what_the_workload_role_produced(secure_geo: LocalCluster, tmp_path: Path) -> None:
    cfg = WorkloadConfig("", producers=1, consumers=1, rate=200, duration=4)
    result = ops.workload_run(secure_geo.state_dir, cfg, tmp_path / "run", EU, consume_cluster=US)
    assert not result.errors and not result.failed, result.errors
    c = result.counters
    # consumed on us: every message crossed the TLS replicator; stored on both clusters
    assert c.acked >= 500 and c.received >= c.acked and c.stored >= 2 * c.acked
    report = replication.inspect(secure_geo, cfg.topic)
    [eu_to_us] = [d for d in report.directions if d.source == EU]
    assert (eu_to_us.destination, eu_to_us.connected, eu_to_us.backlog) == (US, True, 0), report.to_dict()
