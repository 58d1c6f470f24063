"""Geo-replication as the brokers report it: per topic and direction, is the replicator connected,
how far behind is it.

Every topic of a namespace that replicates to more than one cluster is looked up on each of its
clusters; the topic's stats there carry a ``replication`` section with one entry per remote
cluster (the replicator from this cluster to that one). Pulsar counts ``replicationBacklog`` in
entries (a batch of messages is one entry) and ``replicationDelayInSeconds`` from the publish time
of the oldest entry not yet replicated (0 when nothing waits).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pulsarlab.admin.client import AdminError, admin_of, encode_topic
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import StateError
from pulsarlab.topology import Topology, namespace_clusters, namespace_of

_PARTITION = re.compile(r"-partition-[0-9]+$")


@dataclass
class Direction:
    """The replicator of one topic (or partition) from ``source`` to ``destination``."""

    topic: str
    source: str
    destination: str
    connected: bool
    backlog: int | None  # entries not yet replicated; None when the source has no replicator for it
    delay_seconds: int | None
    rate_out: float | None = None  # messages/s sent to the destination
    error: str | None = None  # why the source could not be asked


@dataclass
class ReplicationReport:
    directions: list[Direction] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """Every replicator is connected and has nothing left to send."""
        return bool(self.directions) and all(d.connected and d.backlog == 0 for d in self.directions)

    def to_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, "directions": [asdict(d) for d in self.directions]}


def replicated_namespaces(topo: Topology) -> dict[str, list[str]]:
    """Namespace -> the clusters it replicates to, for every namespace on more than one cluster."""
    out = {}
    for ns in topo.namespaces:
        clusters = sorted(namespace_clusters(topo, ns))
        if len(clusters) > 1:
            out[ns.name] = clusters
    return out


def directions_from_stats(topic: str, source: str, destinations: list[str], stats: dict[str, Any]) -> list[Direction]:
    """One row per destination from a topic's stats on ``source`` (pure: the parsing of the answer)."""
    section = stats.get("replication") or {}
    out = []
    for dest in destinations:
        r = section.get(dest)
        if r is None:
            out.append(Direction(topic, source, dest, False, None, None, error="no replicator to this cluster"))
            continue
        out.append(Direction(
            topic, source, dest, bool(r.get("connected")), int(r.get("replicationBacklog") or 0),
            int(r.get("replicationDelayInSeconds") or 0), float(r.get("msgRateOut") or 0.0),
        ))
    return out


def inspect(cluster: Endpoints, topic: str | None = None) -> ReplicationReport:
    """Every direction of every topic of the replicated namespaces (or of ``topic`` only)."""
    namespaces = replicated_namespaces(cluster.topo)
    if topic is not None and namespace_of(topic) not in namespaces:
        raise StateError(f"{topic} is not in a replicated namespace (replicated: {', '.join(namespaces) or 'none'})")
    report = ReplicationReport()
    for ns, clusters in namespaces.items():
        if topic is not None and namespace_of(topic) != ns:
            continue
        for source in clusters:
            others = [c for c in clusters if c != source]
            try:
                admin = admin_of(cluster, source)
                names = admin.namespace_topics(ns)
            except (AdminError, StateError) as exc:
                report.directions += [Direction(topic or ns, source, d, False, None, None, error=str(exc)) for d in others]
                continue
            if topic is not None:
                names = [t for t in names if _PARTITION.sub("", t) == topic]
            for name in names:
                try:
                    stats = admin.get_json(f"/admin/v2/{encode_topic(name)}/stats", missing=(404,)) or {}
                except AdminError as exc:
                    report.directions += [Direction(name, source, d, False, None, None, error=str(exc)) for d in others]
                    continue
                report.directions += directions_from_stats(name, source, others, stats)
    report.directions.sort(key=lambda d: (d.topic, d.source, d.destination))
    return report


def wait_caught_up(cluster: Endpoints, topic: str, source: str, timeout: float, interval: float = 1.0) -> ReplicationReport:
    """Wait (at most ``timeout`` s) until every replicator of ``topic`` from ``source`` is connected
    with nothing left to send; return the last report either way (what did not arrive is then the
    verifier's to find)."""
    deadline = time.monotonic() + timeout
    while True:
        report = inspect(cluster, topic)
        mine = [d for d in report.directions if d.source == source]
        if (mine and all(d.connected and d.backlog == 0 for d in mine)) or time.monotonic() >= deadline:
            return report
        time.sleep(interval)
