"""A bookie's id (``address:bookie-port``), decided by ``pulsarlab.topology.ids`` for the rack map,
the reconciler, cookies, metrics, placement, chaos and the runtimes' registration waits."""

from __future__ import annotations

import pytest

from pulsarlab.admin.reconcile import desired_state
from pulsarlab.chaos.outages import cookie_path
from pulsarlab.topology import bookie_id, broker_id, id_address, load, parse


def test_a_bookie_id_is_its_address_and_bookie_port() -> None:
    sync = load("sync")
    assert bookie_id(sync, sync.node("bk1-us")) == "127.0.2.1:3181"
    assert broker_id(sync, sync.node("pulsar1-us")) == "127.0.2.3:8080"


def test_an_explicit_address_and_port_are_the_id() -> None:
    data = load("smoke").model_dump(mode="json", exclude_none=True)
    bk = next(n for n in data["nodes"] if n["name"] == "bk1")
    bk.update(address="127.0.9.9", ports={"bookie": 4181})
    smoke = parse(data)
    assert bookie_id(smoke, smoke.node("bk1")) == "127.0.9.9:4181"


def test_only_a_bookie_has_a_bookie_id() -> None:
    sync = load("sync")
    with pytest.raises(ValueError, match="pulsar1-eu is a broker, not a bookie"):
        bookie_id(sync, sync.node("pulsar1-eu"))
    with pytest.raises(ValueError, match="zk is a zookeeper, not a broker"):
        broker_id(sync, sync.node("zk"))


def test_an_id_leads_back_to_the_address() -> None:
    assert id_address("127.0.1.2:3181") == "127.0.1.2"
    assert id_address("[::1]:3181") == "[::1]"
    assert id_address("127.0.1.2") == "127.0.1.2"


def test_the_rack_map_and_the_cookie_use_the_same_id() -> None:
    sync = load("sync")
    racks = {it.name for it in desired_state(sync, "mycluster") if it.kind == "rack"}
    assert bookie_id(sync, sync.node("bk2-eu")) in racks

    class Cluster:  # cookie_path reads only the topology of the deployment
        topo = sync

    assert cookie_path(Cluster(), "bk2-eu").endswith(f"/ledgers/cookies/{bookie_id(sync, sync.node('bk2-eu'))}")
