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


def test_namespace_of_a_topic() -> None:
    assert replication.namespace_of("persistent://world/global/orders-partition-1") == "world/global"
