"""``pulsarlab upgrade --to V``: a rolling upgrade (or rollback) of a running deployment, one node at
a time in the order and with the gates of the shared order file (:mod:`pulsarlab.upgrade.plan`).

Before any node is touched the order's ``before`` gates are checked against what the nodes report
(every node serving, no under-replicated ledger) and the release is resolved; a refusal names why.
A node already reporting the target release is left alone, so a second run continues where a first
one stopped. Each node: its ``before_stop`` gates, a stop, its files written over the target
distribution's ``conf/``, a start from it, its ``after_start`` gates, and its own report of the
release it runs checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pulsarlab import timeouts
from pulsarlab.deployment import Upgradable
from pulsarlab.distribution import Distribution
from pulsarlab.errors import CheckFailed, NodeStartError
from pulsarlab.progress import Reporter
from pulsarlab.render import bookie_session_s
from pulsarlab.topology import Node, Role
from pulsarlab.upgrade.plan import Order, Step, load_order, node_script, plan, refusals


@dataclass
class Moved:
    """One node of a run: moved (with its seconds away and per gate) or kept (already on the release)."""

    node: str
    role: str
    before: str | None
    after: str | None
    action: str  # "moved" or "kept"
    seconds: float = 0.0
    gates: dict[str, float] = field(default_factory=dict)
    away: tuple[int, int] | None = None  # wall clock (ns): from its first gate before the stop to ready again
    fell: bool = False  # it stopped by itself before its turn (its window: from its start after that)


@dataclass
class UpgradeResult:
    target: str
    nodes: list[Moved]
    seconds: float

    def to_dict(self) -> dict:
        return {"target": self.target, "seconds": round(self.seconds, 1),
                "nodes": [vars(n) | {"seconds": round(n.seconds, 1)} for n in self.nodes]}


def bookie_url(cluster: Upgradable, node: Node) -> str:
    return f"http://{cluster.topo.address_of(node)}:{node.port('http')}"


def under_replicated(cluster: Upgradable, ready: dict[str, bool]) -> dict[str, list[int]]:
    """Per cluster, the ledgers holding entries that auto-recovery lists as under-replicated now
    (read through a ready bookie of it, as ``wait_replicated.py`` reads them on the hosts)."""
    gate = node_script("wait_replicated")
    found: dict[str, list[int]] = {}
    for c in cluster.topo.clusters:
        bookie = next((b for b in cluster.topo.nodes_of(Role.BOOKIE, c.name) if ready.get(b.name)), None)
        if bookie is None:
            continue  # every bookie of it is down: refused as not serving
        found[c.name] = gate.assess(bookie_url(cluster, bookie))[0]
    return found


def check_before(cluster: Upgradable, order: Order) -> dict[str, str | None]:
    """The releases the nodes report now; raises :class:`CheckFailed` (before any node is touched)
    when the order's ``before`` gates do not hold."""
    status = cluster.status()
    reported = {n.name: n.version for n in status}
    ready = {n.name: n.ready for n in status}
    try:
        listed = under_replicated(cluster, ready)
    except (OSError, RuntimeError, ValueError) as exc:
        raise CheckFailed(f"upgrade refused, no node touched: the under-replicated ledgers cannot be read ({exc})") from None
    problems = refusals(order, reported, ready, listed)
    if problems:
        raise CheckFailed(f"upgrade refused, no node touched: {'; '.join(problems)}")
    return reported


class NodeUpgrade:
    """The gates and the move of one node."""

    def __init__(self, cluster: Upgradable, order: Order, dist: Distribution, say: Reporter) -> None:
        self.cluster, self.order, self.dist, self.say = cluster, order, dist, say
        self.delay: tuple[str, int, bool] | None = None  # (peer bookie URL, delay before, paused) while raised

    def run(self, step: Step) -> Moved:
        node = self.cluster.topo.node(step.node)
        tier = self.order.tier(node.role)
        gates: dict[str, float] = {}
        t0, away_from = time.monotonic(), time.time_ns()
        try:
            for gate in tier.before_stop:
                gates[gate] = self._timed(gate, node)
            if self.cluster.alive(node.name):  # a broker's unload_bundles stopped it already
                self.say.update(node.name, "stopping")
                stopping = time.monotonic()
                self.cluster.stop_node(node.name)
                gates["stop"] = time.monotonic() - stopping
            self.cluster.place_node(node.name, self.dist)
            self.say.update(node.name, f"starting on {self.dist.version}")
            started = time.monotonic()
            self.cluster.start_node(node.name)
            gates["ready"] = time.monotonic() - started
            away = (away_from, time.time_ns())
            for gate in tier.after_start:
                if gate != "ready":
                    gates[gate] = self._timed(gate, node)
        except BaseException:
            try:
                self._restore()
            except CheckFailed as exc:  # said, and the node still started again: the first failure is raised
                self.say(str(exc))
            self._bring_back(node)
            raise
        now = self.cluster.reported_versions()[node.name][0]
        if now != self.dist.version:
            raise CheckFailed(f"{node.name} reports Pulsar {now} after its restart, not {self.dist.version}")
        return Moved(node.name, node.role.value, step.running, now, "moved", time.monotonic() - t0, gates, away)

    def _timed(self, gate: str, node: Node) -> float:
        t0 = time.monotonic()
        self.say.update(node.name, gate.replace("_", " "))
        {"raise_recovery_delay": self._raise, "restore_recovery_delay": lambda _n: self._restore(),
         "no_underreplicated_ledger": self._replicated, "unload_bundles": self._unload}[gate](node)
        return time.monotonic() - t0

    def _raise(self, node: Node) -> None:
        """lostBookieRecoveryDelay raised and ledger replication turned off (recovery_delay.py says
        why both) through the first other bookie of the cluster that answers."""
        rd = node_script("recovery_delay")
        for peer in self.cluster.topo.nodes_of(Role.BOOKIE, node.cluster):
            if peer.name == node.name or not self.cluster.alive(peer.name):
                continue
            url = bookie_url(self.cluster, peer)
            before = rd.read(url)
            if before is not None and rd.written(url, self.order.recovery_delay_s):
                self.delay = (url, before, rd.pause(url, self.order.recovery_delay_s, before))
                return
        self.say(f"{node.name}: no other bookie of {node.cluster} answers: the recovery delay is left as it is")

    def _restore(self) -> None:
        if self.delay is not None:
            url, before, paused = self.delay
            self.delay = None
            rd = node_script("recovery_delay")
            value = rd.restored_value(self.order.recovery_delay_s, before)
            error = rd.restore(url, value, resume=paused)
            if error is not None:
                also = " and replication turned on" if paused else ""
                raise CheckFailed(f"the lost-bookie recovery delay could not be set back to {value}{also} through {url}: {error}")

    def _replicated(self, node: Node) -> None:
        limit = self.order.underreplicated_timeout_s * timeouts.scale()  # PULSARLAB_TIMEOUT_SCALE, as every wait
        ok, said = node_script("wait_replicated").wait(bookie_url(self.cluster, node), limit)
        if not ok:
            raise CheckFailed(f"after {node.name}: {said}")

    def _unload(self, node: Node) -> None:
        """The broker's graceful stop: on SIGTERM Pulsar takes the broker out of the load manager's
        choice and unloads every bundle it owns (their topics move to the other brokers) before it
        closes ("Unloading namespace-bundles..." in its log). The admin API's ``brokers/shutdown``
        does the same but leaves the JVM running with its web server closed (seen on 4.0.6), so the
        signal it is."""
        self.cluster.stop_node(node.name)

    def _bring_back(self, node: Node) -> None:
        """After a failure or an interruption: the node this run stopped starts again (from the
        distribution it is placed on), so the upgrade stops with every node serving if it can."""
        if self.cluster.alive(node.name):
            return
        self.say(f"{node.name}: starting it again (the upgrade stopped it)")
        try:
            self.cluster.start_node(node.name)
        except (NodeStartError, CheckFailed) as exc:
            self.say(f"{node.name} did not come back: {str(exc).splitlines()[0]}")


def outlasted_sessions(cluster: Upgradable, zk: Moved, slack_s: float = 3.0) -> bool:
    """Whether the only ZooKeeper node was away (its gates, stop and start) long enough for a
    bookie's session to be declared lost: its clients reconnect within ``slack_s`` of it serving."""
    if zk.away is None:
        return True
    away_s = (zk.away[1] - zk.away[0]) / 1e9
    bookies = cluster.topo.nodes_of(Role.BOOKIE)
    return bool(bookies) and away_s + slack_s >= min(bookie_session_s(cluster.topo, b) for b in bookies)


def await_fallout(cluster: Upgradable, rest: list[Step], quiet_s: float = 10.0, grace_s: float = 3.0) -> None:
    """After the only ZooKeeper node restarted for longer than the bookies' sessions: the nodes
    whose sessions it outlasted shut down within seconds of it, some after it answers again. Waits
    ``quiet_s`` (scaled) for one of ``rest`` to stop, then ``grace_s`` more for the others, so that
    they are all started at once."""
    deadline = time.monotonic() + quiet_s * timeouts.scale()
    while time.monotonic() < deadline:
        if any(not cluster.alive(s.node) for s in rest):
            time.sleep(grace_s)
            return
        time.sleep(0.5)


def start_fallen(cluster: Upgradable, dist: Distribution, rest: list[Step], say: Reporter) -> dict[str, Moved]:
    """The nodes of ``rest`` (not reached yet) that stopped by themselves meanwhile, started at once
    on ``dist``: with a single ZooKeeper node, its restart can outlast the bookies' session timeout
    (``zkTimeout``), and a bookie whose auto-recovery loses its session shuts itself down. They ran nothing the
    gates could protect, so none is waited for (upgrade.yml does the same). Those that were to move
    are returned as moved, for their turn in the order."""
    stopped = [s for s in rest if not cluster.alive(s.node)]
    if not stopped:
        return {}
    names = [s.node for s in stopped]
    say(f"stopped by themselves meanwhile, started now on {dist.version}: {', '.join(names)}")
    since, t0 = time.time_ns(), time.monotonic()
    for s in stopped:
        if s.action != "keep":
            cluster.place_node(s.node, dist)
    cluster.start_group(names)
    took = time.monotonic() - t0
    reported = cluster.reported_versions()
    wrong = [n for n in names if reported[n][0] != dist.version]
    if wrong:
        raise CheckFailed(f"{', '.join(wrong)} started again but report{'s' if len(wrong) == 1 else ''} "
                          f"{', '.join(str(reported[n][0]) for n in wrong)}, not {dist.version}")
    return {s.node: Moved(s.node, s.role.value, s.running, dist.version, "moved", took, {"started_after_stopping": took},
                          (since, time.time_ns()), fell=True) for s in stopped if s.action != "keep"}


def upgrade(cluster: Upgradable, dist: Distribution, say: Reporter,
            order: Order | None = None, between: Callable[[Moved], None] | None = None) -> UpgradeResult:
    """Move every node that does not report ``dist.version`` onto it, one at a time. ``between``
    runs after each node's turn, whatever it took: a move, nothing (already on the version), or a
    node that stopped by itself and was started on it earlier (a test stops the run there)."""
    order = order or load_order()
    t0 = time.monotonic()
    target = dist.version
    reported = check_before(cluster, order)
    steps = plan(order, cluster.topo, reported, target)
    if any(step.action != "keep" for step in steps):
        cluster.stage_release(dist)
    done: list[Moved] = []
    fallen: dict[str, Moved] = {}
    cluster.record_version(target, None, done=False)
    mover = NodeUpgrade(cluster, order, dist, say)
    for i, step in enumerate(steps):
        label = f"{step.node} ({step.role.value}): {step.running} -> {target}"
        if step.action == "keep" or step.node in fallen:
            say.begin(step.node, label)
            moved = fallen.pop(step.node, None) or Moved(step.node, step.role.value, step.running, step.running, "kept")
            again = " (started on it after it stopped by itself)" if moved.action == "moved" else ""
            say.end(step.node, f"already on {target}{again}")
            done.append(moved)
            if between is not None:
                between(moved)
            continue
        say.begin(step.node, label, "starting")
        try:
            moved = mover.run(step)
        except BaseException:
            say.end(step.node, "failed", ok=False)
            raise
        say.end(step.node, f"on {target} ({moved.seconds:.1f}s)")
        done.append(moved)
        if step.role == Role.ZOOKEEPER and len(cluster.topo.nodes_of(Role.ZOOKEEPER)) == 1 \
                and outlasted_sessions(cluster, moved):
            say(f"{step.node} was away longer than the bookies' metadata sessions: watching for nodes that stop")
            await_fallout(cluster, steps[i + 1:])
        fallen.update(start_fallen(cluster, dist, steps[i + 1:], say))
        if between is not None:
            between(moved)
    # a node can stop by itself after its turn too (a bookie whose auto-recovery lost ZooKeeper for a
    # second on a loaded machine): the run does not end with a node down it could start (upgrade.yml too)
    start_fallen(cluster, dist, steps, say)
    cluster.record_version(target, dist, done=True)
    return UpgradeResult(target, done, time.monotonic() - t0)
