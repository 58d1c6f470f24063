"""Auto-recovery, observed: after a bookie is lost, BookKeeper's auditor (one per cluster, elected
among the bookies that run the auto-recovery daemon: ``Topology.runs_auto_recovery``) marks
the ledgers that had copies on it under-replicated at once (``lostBookieRecoveryDelay=0``), and
the replication workers copy those fragments to another bookie chosen by the same placement
policy (region-aware in ``sync``: the copy goes to the lost bookie's region). A ledger still open
for writes is fenced and copied only after ``openLedgerRereplicationGracePeriod`` (30 s).

:func:`wait_replicated` waits, with a timeout, until no ledger of a topic keeps a copy on a bookie
that is down or not registered and every entry has copies in every region placement requires.
"""

from __future__ import annotations

import time

from pulsarlab.admin import placement
from pulsarlab.admin.client import AdminError
from pulsarlab.chaos import targets
from pulsarlab.chaos.actions import Done, register
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import StateError
from pulsarlab.topology import Role, bookie_id, topic_cluster

DEFAULT_TIMEOUT_S = 120.0
GONE_AFTER_S = 10.0  # a 404 while a topic loads again is brief; one that lasts means it was deleted


def down_bookies(cluster: Endpoints) -> set[str]:
    """Ids (``address:port``) of the bookies the deployment knows are not running: a killed
    bookie stays registered until its ZooKeeper session expires, so registration alone is late."""
    return {bookie_id(cluster.topo, b) for b in cluster.topo.nodes_of(Role.BOOKIE) if not cluster.alive(b.name)}


def gaps(report: placement.PlacementReport, down: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """What keeps the report's ledgers from being fully replicated (empty when they are): a copy
    on an unregistered bookie or on one of ``down``, or a region without a copy."""
    out = []
    for t in report.topics:
        for led in t.ledgers:
            used = {b for bs in led.ensembles.values() for b in bs}
            if led.under_replicated or used & down:
                out.append(f"{t.topic} ledger {led.ledger_id}: a copy on a lost bookie "
                           f"({', '.join(sorted(used & down) or sorted(used))})")
            if led.missing_regions:
                out.append(f"{t.topic} ledger {led.ledger_id}: no copy in {', '.join(led.missing_regions)}")
    return out


def wait_replicated(cluster: Endpoints, topic: str, timeout: float = DEFAULT_TIMEOUT_S,
                    interval: float = 2.0) -> placement.PlacementReport:
    """The topic's placement once every ledger is fully replicated again; raises StateError naming
    what is still missing when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    missing_since: float | None = None
    while True:
        try:
            report = placement.inspect(cluster, topic)
        except AdminError as exc:  # the topic is being loaded again (after an unload, a broker loss)
            left = [f"placement not readable: {exc}"]
            if exc.status != 404:
                missing_since = None
            elif missing_since is None:
                missing_since = time.monotonic()
            elif time.monotonic() - missing_since >= GONE_AFTER_S:
                raise StateError(f"{topic} does not exist any more (HTTP 404 for {GONE_AFTER_S:.0f}s), so its ledgers "
                                 "cannot be re-replicated: a topic without a durable subscription is deleted, ledgers "
                                 "and all, by its broker once idle (brokerDeleteInactiveTopicsEnabled, every "
                                 "brokerDeleteInactiveTopicsFrequencySeconds); subscribe before producing") from exc
        else:
            missing_since = None
            left = gaps(report, down_bookies(cluster))
            if not left:
                return report
        if time.monotonic() > deadline:
            raise StateError(f"auto-recovery did not re-replicate {topic} within {timeout:.0f}s: " + "; ".join(left[:5]))
        time.sleep(interval)


def _topic_and_timeout(cluster: Endpoints, args: tuple[str, ...]) -> None:
    if len(args) not in (1, 2):
        raise ValueError("needs a topic and optionally a timeout in seconds")
    targets.check_topic_syntax(args[0])
    topic_cluster(cluster.topo, args[0])
    if len(args) == 2:
        try:
            if float(args[1]) <= 0:
                raise ValueError
        except ValueError:
            raise ValueError(f"timeout must be a positive number of seconds (got {args[1]!r})") from None


def await_replicated(cluster: Endpoints, args: tuple[str, ...]) -> Done:
    """A fault-schedule step: wait until the topic's ledgers are fully replicated again."""
    t0 = time.monotonic()
    wait_replicated(cluster, args[0], float(args[1]) if len(args) > 1 else DEFAULT_TIMEOUT_S)
    return Done(f"{args[0]}: every ledger fully replicated across its regions after {time.monotonic() - t0:.1f}s")


register("await-replicated", await_replicated, _topic_and_timeout)
