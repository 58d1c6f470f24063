"""Topology validation: every rule names the field it breaks."""

from __future__ import annotations

import copy

import pytest
import yaml

from pulsarlab.errors import TopologyError
from pulsarlab.topology import BUILTIN_DIR, BUILTINS, Role, load, parse


def spec(name: str) -> dict:
    return yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", BUILTINS)
def test_builtins_validate(name: str) -> None:
    topo = load(name)
    assert topo.name == name
    assert topo.description
    assert topo.nodes_of(Role.ZOOKEEPER)


def test_sync_matches_the_blog() -> None:
    t = load("sync")
    assert [c.name for c in t.clusters] == ["mycluster"]
    assert sorted(n.name for n in t.nodes_of(Role.BOOKIE)) == ["bk1-eu", "bk1-us", "bk2-eu", "bk2-us"]
    assert sorted(n.name for n in t.nodes_of(Role.BROKER)) == ["pulsar1-eu", "pulsar1-us", "pulsar2-eu", "pulsar2-us"]
    c = t.cluster("mycluster")
    assert (c.placement, c.read_reordering) == ("region", True)
    assert (c.persistence.ensemble, c.persistence.write_quorum, c.persistence.ack_quorum) == (2, 2, 2)
    assert {t.rack_of(n) for n in t.nodes_of(Role.BOOKIE) if n.region == "eu"} == {"eu/1"}
    assert [n.name for n in t.namespaces] == ["mytenant/eu", "mytenant/us"]
    eu = next(p for p in c.isolation if p.namespaces == ["mytenant/eu"])
    assert eu.primary == ["pulsar1-eu", "pulsar2-eu"] and eu.secondary == ["*"]
    assert (eu.min_limit, eu.usage_threshold) == (1, 100)


def test_addresses_are_per_region_loopback() -> None:
    t = load("sync")
    assert t.address_of(t.node("zk")) == "127.0.1.1"
    assert t.address_of(t.node("bk1-us")).startswith("127.0.2.")
    assert len({t.address_of(n) for n in t.nodes}) == len(t.nodes)
    other = parse({**spec("sync"), "address_prefix": "127.7"})
    assert other.address_of(other.node("bk1-us")).startswith("127.7.2.")


def test_geo_clusters_have_their_own_metadata_root() -> None:
    t = load("geo")
    assert t.metadata_store_url("cluster-eu").endswith(":2181/cluster-eu")
    assert t.configuration_store_url().endswith(":2181")


def broken(mutate) -> TopologyError:
    data = copy.deepcopy(spec("sync"))
    mutate(data)
    with pytest.raises(TopologyError) as exc:
        parse(data)
    return exc.value


def test_ack_quorum_above_write_quorum_is_refused() -> None:
    e = broken(lambda d: d["clusters"][0]["persistence"].update(ack_quorum=3, write_quorum=2, ensemble=3))
    assert e.field == "clusters[0](mycluster).persistence.write_quorum"
    assert "ack_quorum" in e.rule


def test_write_quorum_above_ensemble_is_refused() -> None:
    e = broken(lambda d: d["namespaces"][0]["persistence"].update(ensemble=2, write_quorum=3, ack_quorum=2))
    assert e.field == "namespaces[0](mytenant/eu).persistence.ensemble"


def test_write_quorum_larger_than_bookies_is_refused() -> None:
    e = broken(lambda d: d["clusters"][0]["persistence"].update(ensemble=5, write_quorum=5, ack_quorum=2))
    assert e.field.endswith("persistence.write_quorum")
    assert "4 bookies" in e.rule


def test_quorum_that_cannot_span_both_regions_is_refused() -> None:
    e = broken(lambda d: d["namespaces"][1]["persistence"].update(ensemble=2, write_quorum=1, ack_quorum=1))
    assert e.field == "namespaces[1](mytenant/us).persistence.write_quorum"
    assert "2 regions" in e.rule


def test_zero_ack_quorum_is_refused() -> None:
    e = broken(lambda d: d["clusters"][0]["persistence"].update(ack_quorum=0))
    assert e.field.endswith("ack_quorum")


def test_unknown_region_is_refused() -> None:
    e = broken(lambda d: d["nodes"][1].update(region="asia"))
    assert e.field == "nodes[1](bk1-eu).region"
    assert "asia" in e.rule


def test_namespace_on_unknown_cluster_is_refused() -> None:
    e = broken(lambda d: d["namespaces"][0].update(clusters=["nowhere"]))
    assert e.field == "namespaces[0](mytenant/eu).clusters"


def test_isolation_policy_naming_unknown_broker_is_refused() -> None:
    e = broken(lambda d: d["clusters"][0]["isolation"][0].update(primary=["pulsar9-eu"]))
    assert e.field == "clusters[0](mycluster).isolation[0](ns-is-policy-eu).primary"


def test_duplicate_node_names_are_refused() -> None:
    e = broken(lambda d: d["nodes"].append(dict(d["nodes"][1])))
    assert e.field == "nodes" and "bk1-eu" in e.rule


def test_port_clash_is_refused() -> None:
    def clash(d: dict) -> None:
        d["nodes"][1]["address"] = "127.0.9.9"
        d["nodes"][2]["address"] = "127.0.9.9"

    e = broken(clash)
    assert "127.0.9.9:3181" in e.rule and "clashes" in e.rule


def test_non_loopback_address_is_refused() -> None:
    e = broken(lambda d: d["nodes"][0].update(address="10.0.0.1"))
    assert e.field == "nodes[0](zk).address"


def test_unknown_field_is_refused_by_name() -> None:
    e = broken(lambda d: d["clusters"][0].update(placment="region"))
    assert "placment" in e.field


def test_region_placement_needs_region_racks() -> None:
    e = broken(lambda d: d["nodes"][1].update(rack="us/1"))
    assert e.field == "nodes(bk1-eu).rack"


def test_unknown_topology_name() -> None:
    with pytest.raises(TopologyError) as exc:
        load("no-such-topology")
    assert "neither a built-in" in str(exc.value)


def test_replicated_subscriptions_need_a_namespace_on_two_clusters() -> None:
    e = broken(lambda d: d["namespaces"][0].update(replicated_subscriptions=True))
    assert e.field == "namespaces[0](mytenant/eu).replicated_subscriptions"
    assert "two clusters" in str(e)
    assert all(ns.replicated_subscriptions for ns in load("geo").namespaces + load("active-active").namespaces)
