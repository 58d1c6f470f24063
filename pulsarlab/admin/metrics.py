"""What each bookie wrote and read, from its own Prometheus endpoint, and the difference of two reads.

Counters used (BookKeeper 4.17 as shipped with Pulsar 4.0):
``bookkeeper_server_ADD_ENTRY_count{success="true"}`` (entries written, summed over threads),
``bookkeeper_server_READ_ENTRY_count{success="true"}`` (entries read) and ``bookie_WRITE_BYTES`` /
``bookie_READ_BYTES``. A diff of two snapshots taken around a consumer shows which bookies served it.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import requests

from pulsarlab.deployment import Endpoints
from pulsarlab.errors import PulsarlabError
from pulsarlab.topology import Node, Role, bookie_id

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
COUNTERS = {
    "added_entries": ("bookkeeper_server_ADD_ENTRY_count", True),
    "read_entries": ("bookkeeper_server_READ_ENTRY_count", True),
    "written_bytes": ("bookie_WRITE_BYTES", False),
    "read_bytes": ("bookie_READ_BYTES", False),
}


class MetricsError(PulsarlabError):
    """A bookie's metrics endpoint did not answer."""


@dataclass(frozen=True)
class BookieCounters:
    """One bookie's counters at one moment (or, from :func:`diff`, their growth)."""

    node: str
    region: str
    bookie_id: str
    added_entries: float
    read_entries: float
    written_bytes: float
    read_bytes: float


def parse_counters(text: str) -> dict[str, float]:
    """Sum the counters of :data:`COUNTERS` in a Prometheus text page (only successful operations)."""
    totals = dict.fromkeys(COUNTERS, 0.0)
    by_metric = {metric: (key, only_ok) for key, (metric, only_ok) in COUNTERS.items()}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in by_metric:
            continue
        key, only_ok = by_metric[m.group(1)]
        if only_ok and 'success="true"' not in (m.group(2) or ""):
            continue
        try:
            totals[key] += float(m.group(3))
        except ValueError:
            continue
    return totals


def bookie_counters(cluster: Endpoints, node: Node, timeout: float = 5.0) -> BookieCounters:
    topo = cluster.topo
    url = f"http://{topo.address_of(node)}:{node.port('http')}/metrics"
    try:
        r = requests.get(url, timeout=timeout)
        r.raise_for_status()
    except requests.RequestException as exc:
        raise MetricsError(f"bookie {node.name}: cannot read {url}: {exc}") from None
    return BookieCounters(node.name, node.region, bookie_id(topo, node), **parse_counters(r.text))


def snapshot(cluster: Endpoints, cluster_name: str | None = None) -> list[BookieCounters]:
    """The counters of every running bookie (of one Pulsar cluster, or all)."""
    nodes = [b for b in cluster.topo.nodes_of(Role.BOOKIE, cluster_name) if cluster.alive(b.name)]
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        return list(pool.map(lambda n: bookie_counters(cluster, n), nodes))


def diff(before: list[BookieCounters], after: list[BookieCounters]) -> list[BookieCounters]:
    """Growth of each counter between two snapshots (bookies present in both)."""
    old = {b.node: b for b in before}
    out = []
    for b in after:
        if b.node not in old:
            continue
        a = old[b.node]
        out.append(BookieCounters(
            b.node, b.region, b.bookie_id,
            **{k: getattr(b, k) - getattr(a, k) for k in COUNTERS},
        ))
    return out


def by_region(counters: list[BookieCounters]) -> dict[str, dict[str, float]]:
    """Counters summed per region."""
    out: dict[str, dict[str, float]] = {}
    for b in counters:
        row = out.setdefault(b.region, dict.fromkeys(COUNTERS, 0.0))
        for k in COUNTERS:
            row[k] += getattr(b, k)
    return out


def as_dicts(counters: list[BookieCounters]) -> list[dict]:
    return [asdict(b) for b in counters]
