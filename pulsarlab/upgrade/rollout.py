"""Settings changed on a running deployment, rolled out safely (``up --apply`` with a topology whose
``config`` / ``jvm_options`` / ``jvm`` differ from the running one's).

Per node, the plan compares what the node was started with (its files rendered from the recorded
topology) with what the new topology renders: its server file's keys and its JVM environment.
A broker key that Pulsar lists as dynamic (``GET /admin/v2/brokers/configuration``), with one new
value for every broker of its cluster (Pulsar keeps a dynamic value per cluster), is set through
the admin API and the node's file rewritten, with no restart. Everything else restarts the node,
one node at a time in the upgrade's order (ZooKeeper, bookies, brokers) through the same gates as
a rolling upgrade (:class:`pulsarlab.upgrade.run.NodeUpgrade`, on the release it runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from pulsarlab.admin.client import admin_of
from pulsarlab.deployment import Upgradable
from pulsarlab.errors import StateError
from pulsarlab.progress import Reporter
from pulsarlab.render import CONF_FILE, node_dirs, parse_properties, render_node, write_topology
from pulsarlab.runtime.jvm import jvm_env
from pulsarlab.runtime.state import ClusterState
from pulsarlab.topology import Node, Role, Topology
from pulsarlab.upgrade.plan import Step, load_order, node_script
from pulsarlab.upgrade.run import NodeUpgrade


@dataclass(frozen=True)
class KeyChange:
    key: str
    old: str | None  # None: not set before (the distribution's default)
    new: str | None  # None: no longer set

    def to_dict(self) -> dict:
        return {"key": self.key, "old": self.old, "new": self.new}

    def __str__(self) -> str:
        def shown(v: str | None) -> str:
            return "(default)" if v is None else v

        return f"{self.key}: {shown(self.old)} -> {shown(self.new)}"


@dataclass
class NodeChange:
    node: str
    role: str
    server: list[KeyChange]  # keys of its broker.conf / bookkeeper.conf / zookeeper.conf
    jvm: list[KeyChange]  # its JVM environment (heap, GC, options)
    dynamic: list[str] = field(default_factory=list)  # broker keys set through the admin API, no restart

    @property
    def restart(self) -> bool:
        return bool(self.jvm) or any(c.key not in self.dynamic for c in self.server)

    def to_dict(self) -> dict:
        return {"node": self.node, "role": self.role, "restart": self.restart, "dynamic": self.dynamic,
                "server": [c.to_dict() for c in self.server], "jvm": [c.to_dict() for c in self.jvm]}

    def lines(self) -> list[str]:
        how = "restart, one at a time, gated" if self.restart else "no restart (dynamic, through the admin API)"
        out = [f"{self.node} ({self.role}): {how}"]
        out += [f"  {c}{'  [dynamic]' if c.key in self.dynamic else ''}" for c in self.server]
        out += [f"  JVM {c}" for c in self.jvm]
        return out


def _diff(old: dict[str, str], new: dict[str, str]) -> list[KeyChange]:
    return [KeyChange(k, old.get(k), new.get(k)) for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]


def _server_keys(topo: Topology, node: Node, base_conf: Path | None) -> dict[str, str]:
    dirs = node_dirs(Path("/nodes"), node)  # the same folders on both sides: only the settings differ
    files = render_node(topo, node, dirs, base_conf)
    return parse_properties(files[dirs.conf / CONF_FILE[node.role]])


def node_changes(old: Topology, new: Topology, base_conf: Path | None = None) -> list[NodeChange]:
    """Per node whose settings differ: what changes in its server file and its JVM environment."""
    out = []
    for node in new.nodes:
        before = old.node(node.name)
        server = _diff(_server_keys(old, before, base_conf), _server_keys(new, node, base_conf))
        jvm = _diff(jvm_env(old, before), jvm_env(new, node))
        if server or jvm:
            out.append(NodeChange(node.name, node.role.value, server, jvm))
    return out


def mark_dynamic(topo: Topology, changes: list[NodeChange], dynamic_keys: dict[str, set[str]]) -> None:
    """Mark the broker keys that can change without a restart: dynamic in Pulsar (``dynamic_keys``,
    per cluster), given a value (not removed), and the same new value on every broker of the
    cluster (a dynamic value is the cluster's, not one broker's). The rule is the playbooks' own
    (files/dynamic_settings.py), which deploy.yml follows on hosts."""
    by_name = {c.node: c for c in changes}
    same_everywhere = node_script("dynamic_settings").same_everywhere
    for cluster in topo.clusters:
        brokers = [b.name for b in topo.nodes_of(Role.BROKER, cluster.name)]
        changed = [{k.key: k.new for k in by_name[b].server} if b in by_name else {} for b in brokers]
        for key in same_everywhere(changed, dynamic_keys.get(cluster.name, set())):
            for b in brokers:
                by_name[b].dynamic.append(key)


def dynamic_keys(cluster: Upgradable) -> dict[str, set[str]]:
    """Per cluster, the broker settings Pulsar changes at run time (its own list)."""
    return {c.name: set(admin_of(cluster, c.name).get_json("/admin/v2/brokers/configuration") or [])
            for c in cluster.topo.clusters}


@dataclass
class RolloutResult:
    changes: list[NodeChange]
    applied: bool
    restarted: list[str] = field(default_factory=list)
    dynamic_set: list[str] = field(default_factory=list)  # "cluster: key=value"
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"applied": self.applied, "restarted": self.restarted, "dynamic_set": self.dynamic_set,
                "seconds": round(self.seconds, 1), "nodes": [c.to_dict() for c in self.changes]}


def roll_out(cluster: Upgradable, changes: list[NodeChange], say: Reporter) -> RolloutResult:
    """Apply ``changes`` to the running deployment (``cluster`` holds the new topology): dynamic
    broker keys through the admin API, then each node that needs it restarted on the release it
    runs, one at a time in the upgrade's order and gates; the new topology is recorded at the end
    (an interrupted rollout shows the rest again on the next ``up``)."""
    t0 = time.monotonic()
    state = ClusterState.load(cluster.state_dir)
    if state is not None and state.upgrading_to:
        raise StateError(f"an upgrade to {state.upgrading_to} is not finished: "
                         f"'pulsarlab upgrade --to {state.upgrading_to}' first, then the settings")
    dist = cluster.distribution()  # every node runs it (no upgrade under way)
    result = RolloutResult(changes, applied=True)
    by_name = {c.node: c for c in changes}
    for c in cluster.topo.clusters:
        done: set[str] = set()
        for b in cluster.topo.nodes_of(Role.BROKER, c.name):
            change = by_name.get(b.name)
            if change is None:
                continue
            for key in change.dynamic:
                if key in done:
                    continue
                value = next(k.new for k in change.server if k.key == key)
                admin_of(cluster, c.name).request("POST", f"/admin/v2/brokers/configuration/{key}/{value}",
                                                  idempotent=True)
                done.add(key)
                result.dynamic_set.append(f"{c.name}: {key}={value}")
                say(f"{c.name}: {key}={value} set on every broker (dynamic, no restart)")
    order = load_order()
    for tier in order.tiers:
        for node in cluster.topo.nodes_of(tier.role):
            change = by_name.get(node.name)
            if change is None:
                continue
            if not change.restart:
                cluster.place_node(node.name, dist)  # its files say the new values too: a later start keeps them
                continue
            say.begin(node.name, f"{node.name} ({node.role.value}): new settings", "starting")
            try:
                moved = NodeUpgrade(cluster, order, dist, say).run(Step(node.name, node.role, dist.version, "move"))
            except BaseException:
                say.end(node.name, "failed", ok=False)
                raise
            say.end(node.name, f"restarted with its new settings ({moved.seconds:.1f}s)")
            result.restarted.append(node.name)
    cluster.record_version(dist.version, dist, done=True)
    write_topology(cluster.topo, cluster.state_dir)
    result.seconds = time.monotonic() - t0
    return result
