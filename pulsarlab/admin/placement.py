"""Proof of placement: who owns each topic, and where each of its ledgers keeps its copies.

For every topic of the topology's namespaces (or one topic): the owning broker (a lookup) and its
region; for every ledger (listed by the broker's ``internalStats``), its ensembles of bookie ids as
the ledger's metadata in the metadata store holds them now, the regions of those bookies and whether
Pulsar reports it under-replicated. The ensembles are read through a running bookie's HTTP API
(``/api/v1/ledger/metadata/?ledger_id=N``: BookKeeper decodes its own metadata format), not from
the broker, whose copy of a ledger's metadata keeps the ensemble it wrote with after the bookies'
auto-recovery has moved the copies. Two things raise a flag:

* a ledger whose copies of some entry miss a region, on a cluster with region-aware placement;
* a topic of a namespace whose isolation policy names primary brokers of one region, owned by a
  broker of another region while that region has brokers up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import requests

from pulsarlab.admin.client import AdminError, LedgerInfo, admin_of
from pulsarlab.deployment import Endpoints
from pulsarlab.topology import Role, Topology, id_address, namespace_clusters, namespace_of


@dataclass
class LedgerPlacement:
    ledger_id: int
    entries: int
    ensembles: dict[int, list[str]]
    regions: list[str]
    missing_regions: list[str]
    under_replicated: bool  # some bookie of its ensembles is not registered (writable or read-only)
    pulsar_under_replicated: bool  # Pulsar's own flag (on 4.0.8 it reads true even with every bookie up)
    ensembles_from: str = ""  # where the ensembles were read: the metadata store, or the broker and why


@dataclass
class TopicPlacement:
    topic: str
    cluster: str
    owner: str
    owner_region: str
    home_region: str | None
    ledgers: list[LedgerPlacement] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


@dataclass
class PlacementReport:
    topics: list[TopicPlacement]
    brokers_up: dict[str, list[str]]  # region -> broker ids

    @property
    def flags(self) -> list[str]:
        return [f"{t.topic}: {f}" for t in self.topics for f in t.flags]

    def to_dict(self) -> dict:
        return {"ok": not self.flags, "flags": self.flags, "brokers_up": self.brokers_up,
                "topics": [asdict(t) for t in self.topics]}


def region_by_address(topo: Topology, cluster: str, role: Role) -> dict[str, str]:
    """``address`` -> region of the cluster's nodes of one role."""
    return {topo.address_of(n): n.region for n in topo.nodes_of(role, cluster)}


def home_region(topo: Topology, cluster: str, namespace: str) -> str | None:
    """The region of the primary brokers of the isolation policy naming ``namespace`` (if one region)."""
    for pol in topo.cluster(cluster).isolation:
        if namespace in pol.namespaces:
            regions = {topo.node(b).region for b in pol.primary if b != "*"}
            return regions.pop() if len(regions) == 1 else None
    return None


def write_sets(bookies: list[str], write_quorum: int) -> list[list[str]]:
    """The bookie sets that hold one entry each: ``write_quorum`` bookies from every start index."""
    e = len(bookies)
    w = min(write_quorum, e) if write_quorum else e
    return [[bookies[(i + k) % e] for k in range(w)] for i in range(e)] if e else []


def bookie_get(cluster: Endpoints, name: str, path: str) -> tuple[str, Any] | None:
    """``(bookie id, JSON answer)`` of the first running bookie of cluster ``name`` that answers
    ``GET path`` on its HTTP API; None when none does. A 404 is an answer (``None`` as JSON)."""
    topo = cluster.topo
    for b in topo.nodes_of(Role.BOOKIE, name):
        if not cluster.alive(b.name):
            continue
        try:
            resp = requests.get(f"http://{topo.address_of(b)}:{b.port('http')}{path}", timeout=5)
            if resp.status_code == 404:
                return b.name, None
            resp.raise_for_status()
            return b.name, resp.json()
        except (requests.RequestException, ValueError):
            continue
    return None


def available_bookies(cluster: Endpoints, name: str) -> set[str] | None:
    """Bookie ids registered right now (writable and read-only), asked of a running bookie."""
    out: set[str] = set()
    for kind in ("rw", "ro"):
        got = bookie_get(cluster, name, f"/api/v1/bookie/list_bookies?print_hostnames=false&type={kind}")
        if got is None:
            return None
        out |= set(got[1] or ())  # a map of bookie id -> host name
    return out


def stored_ensembles(cluster: Endpoints, name: str, ledger_id: int) -> tuple[dict[int, list[str]] | None, str]:
    """A ledger's ensembles (first entry id -> bookie ids) as its metadata in the metadata store
    holds them, read through a running bookie of cluster ``name``; ``(None, why)`` when no bookie
    answered or the ledger has no metadata (deleted)."""
    got = bookie_get(cluster, name, f"/api/v1/ledger/metadata/?ledger_id={ledger_id}")
    if got is None:
        return None, "no running bookie answered /api/v1/ledger/metadata"
    bookie, data = got
    meta = (data or {}).get(str(ledger_id)) if isinstance(data, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("allEnsembles"), dict):
        return None, f"{bookie} has no metadata of ledger {ledger_id}"
    ensembles = {int(first): [b["id"] if isinstance(b, dict) else str(b) for b in ids]
                 for first, ids in meta["allEnsembles"].items()}
    return dict(sorted(ensembles.items())), f"metadata store (via {bookie})"


def ledger_placement(
    led: LedgerInfo, bookie_regions: dict[str, str], regions: list[str], write_quorum: int, region_aware: bool,
    available: set[str] | None = None,
) -> LedgerPlacement:
    """Regions of a ledger's copies; ``missing_regions`` lists regions some entry has no copy in."""
    seen: set[str] = set()
    missing: set[str] = set()
    for bookies in led.ensembles.values():
        for ws in write_sets(bookies, write_quorum):
            have = {bookie_regions.get(id_address(b), "?") for b in ws}
            seen |= have
            if region_aware:
                missing |= set(regions) - have
    used = {b for bookies in led.ensembles.values() for b in bookies}
    under = bool(used - available) if available is not None else led.under_replicated
    return LedgerPlacement(
        led.ledger_id, led.entries, led.ensembles, sorted(seen), sorted(missing), under, led.under_replicated,
    )


def inspect(cluster: Endpoints, topic: str | None = None) -> PlacementReport:
    """Placement of every topic of the topology's namespaces (or of ``topic``)."""
    topo = cluster.topo
    report = PlacementReport([], {})
    for ns in topo.namespaces:
        if topic and namespace_of(topic) != ns.name:
            continue
        for cname in namespace_clusters(topo, ns):
            c = topo.cluster(cname)
            admin = admin_of(cluster, cname)
            brokers = region_by_address(topo, cname, Role.BROKER)
            bookies = region_by_address(topo, cname, Role.BOOKIE)
            regions = sorted(set(bookies.values()))
            up: dict[str, list[str]] = {}
            for b in admin.active_brokers(cname):
                up.setdefault(brokers.get(id_address(b), "?"), []).append(b)
            report.brokers_up.update({f"{cname}/{r}": v for r, v in up.items()})
            persistence = ns.persistence or c.persistence
            home = home_region(topo, cname, ns.name)
            live = available_bookies(cluster, cname)
            for t in [topic] if topic else admin.namespace_topics(ns.name):
                try:
                    ledgers = admin.ledgers(t)
                except AdminError as exc:
                    if topic or exc.status != 404:
                        raise
                    continue  # listed, then deleted (an inactive topic's clean-up) before it could be read
                owner = admin.lookup(t)
                tp = TopicPlacement(t, cname, owner.broker_id, brokers.get(owner.host, "?"), home)
                for led in ledgers:
                    stored, source = stored_ensembles(cluster, cname, led.ledger_id)
                    if stored is not None:
                        led = replace(led, ensembles=stored, metadata_seen=True)
                    else:
                        source = f"broker internalStats ({source})"
                    lp = ledger_placement(led, bookies, regions, persistence.write_quorum, c.placement == "region",
                                          live)
                    lp.ensembles_from = source
                    if stored is None:
                        tp.flags.append(f"ledger {lp.ledger_id}: ensembles read from the broker, which may keep a "
                                        f"stale copy ({source})")
                    tp.ledgers.append(lp)
                    if lp.missing_regions:
                        tp.flags.append(f"ledger {lp.ledger_id} has entries with no copy in {', '.join(lp.missing_regions)}")
                if home and tp.owner_region != home and up.get(home):
                    tp.flags.append(f"owned by {tp.owner} in {tp.owner_region}, though {home} has brokers up "
                                    f"({', '.join(up[home])})")
                report.topics.append(tp)
    return report
