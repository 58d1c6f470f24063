"""Reading geo-replication state out of topic stats (no cluster)."""

from __future__ import annotations

from pulsarlab.admin import replication
from pulsarlab.topology import load


def test_only_namespaces_on_several_clusters_are_replicated() -> None:
    assert replication.replicated_namespaces(load("geo")) == {"world/global": ["cluster-eu", "cluster-us"]}
    assert replication.replicated_namespaces(load("sync")) == {}


def test_each_destination_gets_one_direction_and_a_missing_replicator_is_not_connected() -> None:
    stats = {"msgRateIn": 3.0, "replication": {"cluster-us": {
        "connected": True, "replicationBacklog": 12, "replicationDelayInSeconds": 2, "msgRateOut": 40.5}}}
    [us, ap] = replication.directions_from_stats("persistent://world/global/t", "cluster-eu", ["cluster-us", "cluster-ap"],
                                                 stats)
    assert (us.source, us.destination, us.connected, us.backlog, us.delay_seconds, us.rate_out) == (
        "cluster-eu", "cluster-us", True, 12, 2, 40.5)
    assert (ap.connected, ap.backlog, ap.error) == (False, None, "no replicator to this cluster")
    report = replication.ReplicationReport([us])
    assert not report.healthy  # connected, but entries are still waiting
    us.backlog = 0
    assert report.healthy and report.to_dict()["directions"][0]["destination"] == "cluster-us"
    assert not replication.ReplicationReport([]).healthy


def test_geo_workload_produces_on_one_cluster_consumes_on_the_other_and_reads_both() -> None:
    from types import SimpleNamespace

    import pytest

    from pulsarlab import ops
    from pulsarlab.errors import StateError

    geo = SimpleNamespace(topo=load("geo"))
    t = ops.workload_target(geo, "cluster-eu", None, "cluster-us", "persistent://world/global/orders")  # type: ignore[arg-type]
    assert (t.cluster, t.consumer_cluster, t.consumer_url) == ("cluster-eu", "cluster-us", "pulsar://127.0.2.3:6650,127.0.2.4:6650")
    assert sorted(t.read_clusters) == ["cluster-eu", "cluster-us"] and t.replication == ["cluster-eu", "cluster-us"]
    same = ops.workload_target(geo, "cluster-eu", None, None, "persistent://world/global/orders")  # type: ignore[arg-type]
    assert same.consumer_cluster == "cluster-eu" and same.consumer_url == same.service_url
    with pytest.raises(StateError, match="no cluster 'cluster-ap'"):
        ops.workload_target(geo, "cluster-eu", None, "cluster-ap")  # type: ignore[arg-type]
    sync = SimpleNamespace(topo=load("sync"))
    one = ops.workload_target(sync, None, None, None, "persistent://mytenant/eu/orders")  # type: ignore[arg-type]
    assert list(one.read_clusters) == ["mycluster"] and one.replication == []
