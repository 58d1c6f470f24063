"""Which clusters serve a topic: the one rule (``pulsarlab.topology.topics``) chaos targets,
scenario conditions, placement, replication and the workload all use. The copies it replaced
disagreed on the cases below."""

from __future__ import annotations

from typing import Any

import pytest

from pulsarlab.errors import TopologyError
from pulsarlab.topology import (
    cluster_namespace,
    home_cluster,
    load,
    namespace_of,
    parse,
    topic_cluster,
    topic_clusters,
    topic_namespace,
)


def geo_with(**changes: Any):
    data = load("geo").model_dump(mode="json", exclude_none=True)
    data.update(changes)
    return parse(data)


def test_the_namespace_of_any_topic_form() -> None:
    assert namespace_of("persistent://world/global/orders-partition-1") == "world/global"
    # scenario conditions once stripped only "persistent://", so these named a wrong namespace
    assert namespace_of("non-persistent://world/global/t") == "world/global"
    assert namespace_of("world/global/t") == "world/global"


def test_a_namespace_of_the_topology_is_owned_by_its_first_cluster() -> None:
    geo = load("geo")
    assert topic_cluster(geo, "persistent://world/global/t") == "cluster-eu"
    assert topic_clusters(geo, "persistent://world/global/t") == ["cluster-eu", "cluster-us"]
    assert topic_cluster(geo, "non-persistent://world/global/t") == "cluster-eu"


def test_a_namespace_without_clusters_lives_where_its_tenant_is_allowed() -> None:
    # scenario conditions took every cluster of the topology here, not the tenant's
    topo = geo_with(tenants=[{"name": "world", "clusters": ["cluster-us"]}],
                    namespaces=[{"name": "world/us-only"}])
    topic = "persistent://world/us-only/t"
    ns = topic_namespace(topo, topic)
    assert ns.name == "world/us-only" and home_cluster(topo, ns) == "cluster-us"
    assert topic_cluster(topo, topic) == "cluster-us"
    assert topic_clusters(topo, topic) == ["cluster-us"]
    assert cluster_namespace(topo, "cluster-us") == "world/us-only"
    assert cluster_namespace(topo, "cluster-eu") == "public/default"


def test_a_namespace_the_topology_does_not_name() -> None:
    sync = load("sync")
    # one cluster: it serves public/default
    assert topic_cluster(sync, "persistent://public/default/t") == "mycluster"
    geo = load("geo")
    # several: every cluster has such a topic, none owns it (scenario conditions silently took the first)
    assert topic_clusters(geo, "persistent://public/default/t") == ["cluster-eu", "cluster-us"]
    with pytest.raises(ValueError, match="not in a namespace of topology 'geo'.*several.*world/global"):
        topic_cluster(geo, "persistent://public/default/t")


def test_a_namespace_on_no_cluster_is_refused_when_the_topology_loads() -> None:
    # ``clusters: []`` once meant "every cluster" to one copy and "no owner" (an IndexError) to another
    with pytest.raises(TopologyError, match=r"namespaces\[0\]\(world/global\)\.clusters.*at least one cluster"):
        geo_with(namespaces=[{"name": "world/global", "clusters": []}])
