"""Conditions a scenario waits for: ``node_alive NODE``, ``node_dead NODE``, ``topic_owned_in REGION``,
``under_replicated N`` (at most N of the topic's ledgers have a copy on a bookie that is gone),
``in_every_region`` (each entry of each of the topic's ledgers has a copy in every region, read from
the ledger metadata: what the placement repair brings back after a region's return)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pulsarlab.admin import placement
from pulsarlab.admin.client import AdminError, admin_of
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import PulsarlabError, StateError
from pulsarlab.scenarios.placement import judged as placement_judged
from pulsarlab.scenarios.placement import read as placement_read
from pulsarlab.topology import Role, Topology, namespace_of, topic_cluster
from pulsarlab.verify.model import PASS

POLL_S = 1.0
UNLOAD_EVERY_S = 5.0


@dataclass(frozen=True)
class Condition:
    """``holds(cluster, topic, args) -> (held, what is seen now)``; ``nudge`` (optional) acts to make it hold."""

    check_args: Callable[[Topology, list[str]], None]
    holds: Callable[[Endpoints, str, list[str]], tuple[bool, str]]
    nudge: Callable[[Endpoints, str, list[str]], None] | None = None


def _one_node(topo: Topology, args: list[str]) -> None:
    if len(args) != 1:
        raise ValueError("takes one node name")
    try:
        topo.node(args[0])
    except KeyError:
        raise ValueError(f"no node {args[0]!r} (nodes: {', '.join(n.name for n in topo.nodes)})") from None


def _one_region(topo: Topology, args: list[str]) -> None:
    if len(args) != 1 or args[0] not in topo.regions:
        raise ValueError(f"takes one region of {', '.join(topo.regions)}")


def _count(_topo: Topology, args: list[str]) -> None:
    if len(args) != 1 or not args[0].isdigit():
        raise ValueError("takes one count, e.g. 'under_replicated 0'")


def _no_args(_topo: Topology, args: list[str]) -> None:
    if args:
        raise ValueError("takes no argument")


def _node_alive(cluster: Endpoints, _topic: str, args: list[str]) -> tuple[bool, str]:
    up = cluster.alive(args[0])
    return up, f"{args[0]} {'alive' if up else 'not running'}"


def _node_dead(cluster: Endpoints, topic: str, args: list[str]) -> tuple[bool, str]:
    up, seen = _node_alive(cluster, topic, args)
    return not up, seen


def _owner_region(cluster: Endpoints, topic: str) -> str:
    name = topic_cluster(cluster.topo, topic)
    host = admin_of(cluster, name, retries=1).lookup(topic).host
    regions = placement.region_by_address(cluster.topo, name, Role.BROKER)
    return regions.get(host, f"? ({host})")


def _owned_in(cluster: Endpoints, topic: str, args: list[str]) -> tuple[bool, str]:
    try:
        region = _owner_region(cluster, topic)
    except (AdminError, StateError) as exc:
        return False, f"lookup failed: {str(exc).splitlines()[0]}"
    return region == args[0], f"owned in {region}"


def _unload(cluster: Endpoints, topic: str, _args: list[str]) -> None:
    """Unload the topic's namespace so the isolation policy places the topic afresh."""
    try:
        admin = admin_of(cluster, topic_cluster(cluster.topo, topic), retries=1)
        admin.request("PUT", f"/admin/v2/namespaces/{namespace_of(topic)}/unload", idempotent=True)
    except (AdminError, StateError):
        pass  # the next poll says what is seen


def _under_replicated(cluster: Endpoints, topic: str, args: list[str]) -> tuple[bool, str]:
    try:
        report = placement.inspect(cluster, topic)
    except (AdminError, StateError) as exc:
        return False, f"placement unknown: {str(exc).splitlines()[0]}"
    n = sum(1 for t in report.topics for led in t.ledgers if led.under_replicated)
    return n <= int(args[0]), f"{n} ledger(s) under-replicated"


def _in_every_region(cluster: Endpoints, topic: str, _args: list[str]) -> tuple[bool, str]:
    try:
        seen, status = placement_judged(placement_read(cluster, topic))
    except PulsarlabError as exc:
        return False, f"placement unknown: {str(exc).splitlines()[0]}"
    return status == PASS, seen


def _missing_copy_in(cluster: Endpoints, topic: str, args: list[str]) -> tuple[bool, str]:
    """Some ledger of the topic (the open one too) has entries placed with no copy in the region."""
    try:
        seen = placement_read(cluster, topic)
    except PulsarlabError as exc:
        return False, f"placement unknown: {str(exc).splitlines()[0]}"
    lacking = [led["ledger"] for led in seen["ledgers"] if args[0] in led["missing_regions"]]
    if lacking:
        return True, f"ledger(s) {', '.join(map(str, lacking))}: no copy in {args[0]}"
    return False, placement_judged(seen)[0]


CONDITIONS: dict[str, Condition] = {
    "node_alive": Condition(_one_node, _node_alive),
    "node_dead": Condition(_one_node, _node_dead),
    "topic_owned_in": Condition(_one_region, _owned_in, _unload),
    "under_replicated": Condition(_count, _under_replicated),
    "in_every_region": Condition(_no_args, _in_every_region),
    "missing_copy_in": Condition(_one_region, _missing_copy_in),
}


@dataclass
class WaitRecord:
    """One wait as it went: the condition, when it started (s from producing, or None before it), how
    long it took, whether it held within its timeout, and what was seen at its first poll and its last."""

    condition: str
    started_s: float | None
    seconds: float
    held: bool
    seen: str
    first_seen: str = ""

    def to_json(self) -> dict:
        return {"condition": self.condition, "started_s": None if self.started_s is None else round(self.started_s, 3),
                "seconds": round(self.seconds, 3), "held": self.held, "seen": self.seen, "first_seen": self.first_seen}


def wait_for(
    cluster: Endpoints, topic: str, words: list[str], timeout: float, started_s: float | None = None,
    stop: threading.Event | None = None,
) -> WaitRecord:
    """Poll a condition until it holds, ``timeout`` passes or ``stop`` is set (nudging it every few
    seconds if it can)."""
    name, *args = words
    cond = CONDITIONS[name]
    t0 = time.monotonic()
    last_nudge = t0 - UNLOAD_EVERY_S
    first_seen = None
    while True:
        held, seen = cond.holds(cluster, topic, args)
        first_seen = seen if first_seen is None else first_seen
        elapsed = time.monotonic() - t0
        if held or elapsed >= timeout or (stop is not None and stop.is_set()):
            return WaitRecord(" ".join(words), started_s, elapsed, held, seen, first_seen)
        if cond.nudge is not None and time.monotonic() - last_nudge >= UNLOAD_EVERY_S:
            cond.nudge(cluster, topic, args)
            last_nudge = time.monotonic()
        pause = min(POLL_S, max(0.0, timeout - (time.monotonic() - t0)))
        if stop is not None:
            stop.wait(pause)
        else:
            time.sleep(pause)
