"""The ``sync`` stretch cluster on real Pulsar: configured over REST, placement and failover proven."""

from __future__ import annotations

import time
import uuid

import pulsar
import pytest

from pulsarlab import ops, topology
from pulsarlab.admin import metrics, placement
from pulsarlab.admin.client import AdminClient
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.security import client
from tests.eventually import eventually

pytestmark = pytest.mark.cluster

TOPIC = "persistent://mytenant/eu/orders"
N = 1000


@pytest.fixture(scope="module")
def produced(sync: LocalCluster) -> list[bytes]:
    """N messages acknowledged on the eu topic."""
    payloads = [f"order-{i}-{uuid.uuid4().hex}".encode() for i in range(N)]
    _produce(sync, payloads)
    return payloads


def _admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient(cluster.admin_url("mycluster"))


def _drain(
    cluster: LocalCluster, topic: str, want: set[bytes], timeout: float = 60.0, subscription: str | None = None
) -> set[bytes]:
    """Consume (a new subscription from the earliest position, or ``subscription``) until every
    payload of ``want`` arrived or time runs out."""
    got: set[bytes] = set()
    c = client(cluster.topo.service_url("mycluster"))
    try:
        consumer = c.subscribe(topic, subscription or f"check-{uuid.uuid4().hex[:8]}",
                               initial_position=pulsar.InitialPosition.Earliest)
        deadline = time.monotonic() + timeout
        while not want <= got and time.monotonic() < deadline:
            try:
                msg = consumer.receive(timeout_millis=2000)
            except pulsar.Timeout:
                continue
            got.add(msg.data())
            consumer.acknowledge(msg)
    finally:
        c.close()
    return got


def test_every_ledger_has_a_copy_in_each_region_and_an_eu_broker_owns_the_topic(
    sync: LocalCluster, produced: list[bytes]
) -> None:
    assert_placed_in_both_regions(sync, TOPIC)


def assert_placed_in_both_regions(cluster: LocalCluster, topic: str, home: str = "eu") -> None:
    """A broker of ``home`` (the topic's namespace's region) owns ``topic`` and every ledger of it
    has one copy in eu and one in us."""
    report = placement.inspect(cluster, topic)
    [t] = report.topics
    assert t.owner_region == home and t.home_region == home
    assert t.ledgers, "the topic has no ledger"
    for led in t.ledgers:
        assert led.ensembles and led.regions == ["eu", "us"] and not led.missing_regions, led
        for bookies in led.ensembles.values():
            assert len(bookies) == 2
    assert not report.flags


def test_an_eu_consumer_reads_from_eu_bookies(sync: LocalCluster, produced: list[bytes]) -> None:
    _admin(sync).unload_topic(TOPIC)  # drop the broker's cache: reads must go to bookies
    before = metrics.snapshot(sync)
    got = _drain(sync, TOPIC, set(produced))
    growth = metrics.by_region(metrics.diff(before, metrics.snapshot(sync)))
    assert set(produced) <= got
    assert growth["eu"]["read_entries"] >= N
    assert growth["us"]["read_entries"] <= N * 0.02, growth


def test_configure_repairs_drift_then_has_nothing_to_change(sync: LocalCluster) -> None:
    admin = _admin(sync)
    bookie_id = topology.bookie_id(sync.topo, sync.topo.node("bk1-us"))
    admin.set_rack(bookie_id, "eu", "eu/1")  # a wrong rack, set by hand
    fixed = ops.configure(sync.state_dir)
    assert [(c.object, c.action) for c in fixed.changes] == [(f"rack {bookie_id}", "update")] * 2
    assert admin.racks()[bookie_id].rack.strip("/") == "us/1"
    again = ops.configure(sync.state_dir)
    assert again.changes == [] and again.restarted == []


def _produce(cluster: LocalCluster, payloads: list[bytes], topic: str = TOPIC) -> None:
    c = client(cluster.topo.service_url("mycluster"))
    try:
        p = c.create_producer(topic, batching_enabled=False, send_timeout_millis=30000)
        for data in payloads:
            p.send(data)
        p.close()
    finally:
        c.close()


def test_losing_both_eu_brokers_moves_the_topic_to_us_and_traffic_goes_on(sync: LocalCluster) -> None:
    # a durable subscription keeps what is produced from here on (acknowledged data is trimmed)
    sub = f"failover-{uuid.uuid4().hex[:8]}"
    c = client(sync.topo.service_url("mycluster"))
    c.subscribe(TOPIC, sub).close()
    c.close()
    before = [f"before-failover-{i}".encode() for i in range(100)]
    _produce(sync, before)
    for name in ("pulsar1-eu", "pulsar2-eu"):
        sync.stop_node(name)
    try:
        _failover_goes_on(sync, sub, before)
    finally:  # give the region back: later tests expect eu brokers owning eu topics
        for name in ("pulsar1-eu", "pulsar2-eu"):
            sync.start_node(name)
        _admin(sync).request("PUT", "/admin/v2/namespaces/mytenant/eu/unload", idempotent=True)


def _failover_goes_on(sync: LocalCluster, sub: str, before: list[bytes]) -> None:
    admin = _admin(sync)
    us_hosts = {sync.topo.address_of(sync.topo.node(b)) for b in ("pulsar1-us", "pulsar2-us")}

    def owned_in_us() -> None:
        owner = admin.lookup(TOPIC)  # fails while the bundle is being reassigned
        assert owner.host in us_hosts, owner

    eventually(owned_in_us, timeout=90, interval=1, what=f"{TOPIC} owned by a us broker")
    after = [f"after-failover-{i}".encode() for i in range(100)]
    _produce(sync, after)
    got = _drain(sync, TOPIC, set(before) | set(after), timeout=90, subscription=sub)
    assert set(before) | set(after) <= got
    report = placement.inspect(sync, TOPIC)
    assert report.topics[0].owner_region == "us"
    for led in report.topics[0].ledgers:
        assert led.regions == ["eu", "us"], led
    assert not report.flags  # eu has no broker up, so a us owner is expected
