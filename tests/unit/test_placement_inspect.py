"""``inspect placement`` over a namespace whose topics change while it reads them: a topic the
broker listed and then deleted (an inactive topic's clean-up) is left out, not an error; a topic the
user named that does not exist is one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pulsarlab.admin import placement
from pulsarlab.admin.client import AdminError, LedgerInfo, Lookup
from pulsarlab.topology import load

GONE = "persistent://smoke/test/gone"
KEPT = "persistent://smoke/test/kept"


class Admin:
    """A broker whose namespace lists two topics, one deleted before its stats are read."""

    def active_brokers(self, cluster: str) -> list[str]:
        return []

    def namespace_topics(self, ns: str) -> list[str]:
        return [GONE, KEPT] if ns == "smoke/test" else []

    def ledgers(self, topic: str) -> list[LedgerInfo]:
        if topic != KEPT:
            raise AdminError("GET", f"http://broker/admin/v2/{topic}/internalStats", 404, f"Topic {topic} not found")
        return [LedgerInfo(ledger_id=7, entries=3, size=30, ensembles={0: ["b:3181"]}, under_replicated=False,
                           metadata_seen=True)]

    def lookup(self, topic: str) -> Lookup:
        return Lookup("pulsar://broker:6650", "http://broker:8080")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setattr(placement, "admin_of", lambda cluster, name: Admin())
    return SimpleNamespace(topo=load("smoke"), alive=lambda name: False)


def test_a_topic_deleted_between_listing_and_reading_is_left_out(cluster: SimpleNamespace) -> None:
    report = placement.inspect(cluster)  # type: ignore[arg-type]
    assert [t.topic for t in report.topics] == [KEPT]
    assert [led.ledger_id for led in report.topics[0].ledgers] == [7]


def test_a_named_topic_that_does_not_exist_is_an_error(cluster: SimpleNamespace) -> None:
    with pytest.raises(AdminError, match="not found"):
        placement.inspect(cluster, GONE)  # type: ignore[arg-type]
