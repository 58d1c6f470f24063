"""Which nodes a fault hits, decided when the fault runs.

A target is one of:

* ``NAME`` - a node of the topology (``bk1-eu``);
* ``owner:TOPIC`` - the broker that owns ``TOPIC`` now (a lookup over the admin REST API);
* ``ensemble:TOPIC`` - a bookie of the ensemble of the topic's newest ledger (the last
  ensemble of that ledger: the bookies being written to);
* ``region:R`` - every node of region ``R``.
* ``down:ROLE`` - every node of that role (``bookie``, ``broker``...) that is not running now
  (``disk-loss down:bookie`` after ``kill ensemble:{topic}``: the bookie that was killed).

:func:`parse` and :func:`check` need no running cluster (syntax, known node, region and
namespace); :func:`resolve` asks the running cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsarlab.admin.client import admin_of
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import StateError
from pulsarlab.topology import Role, Topology, id_address, topic_cluster

KINDS = ("owner", "ensemble", "region", "down")


@dataclass(frozen=True)
class Target:
    """``kind`` is ``node`` or one of :data:`KINDS`; ``value`` the node name, topic or region."""

    kind: str
    value: str

    def __str__(self) -> str:
        return self.value if self.kind == "node" else f"{self.kind}:{self.value}"


def parse(text: str) -> Target:
    """A target from its text; raises ``ValueError`` on bad syntax (not on unknown names)."""
    text = text.strip()
    if not text:
        raise ValueError("empty target")
    kind, sep, value = text.partition(":")
    if not sep:
        return Target("node", text)
    if kind not in KINDS:
        raise ValueError(f"unknown target kind {kind!r} in {text!r}: a node name, or "
                         + ", ".join(f"{k}:..." for k in KINDS))
    if not value:
        raise ValueError(f"target {text!r} names no {dict(region='region', down='role').get(kind, 'topic')}")
    if kind == "down" and value not in {r.value for r in Role}:
        raise ValueError(f"{text!r}: down: names a role ({', '.join(r.value for r in Role)})")
    if kind not in ("region", "down"):
        check_topic_syntax(value)
    return Target(kind, value)


def check_topic_syntax(topic: str) -> None:
    """``persistent://tenant/namespace/name`` (or ``non-persistent://``)."""
    domain, sep, rest = topic.partition("://")
    parts = rest.split("/")
    if not sep or domain not in ("persistent", "non-persistent") or len(parts) < 3 or not all(parts[:3]):
        raise ValueError(f"{topic!r} is not a full topic name like persistent://tenant/namespace/topic")


def check(topo: Topology, target: Target, role: Role | None = None) -> None:
    """Raise ``ValueError`` if ``target`` cannot name a node of ``topo`` (of ``role``, if given)."""
    if target.kind == "node":
        try:
            node = topo.node(target.value)
        except KeyError:
            raise ValueError(f"no node {target.value!r} in topology {topo.name!r} "
                             f"(nodes: {', '.join(n.name for n in topo.nodes)})") from None
        if role is not None and node.role != role:
            raise ValueError(f"{node.name} is a {node.role.value}, not a {role.value}")
    elif target.kind == "region":
        if target.value not in topo.regions:
            raise ValueError(f"no region {target.value!r} in topology {topo.name!r} (regions: {', '.join(topo.regions)})")
        if role is not None and not [n for n in topo.nodes if n.region == target.value and n.role == role]:
            raise ValueError(f"region {target.value} has no {role.value}")
    elif target.kind == "down":
        if role is not None and Role(target.value) != role:
            raise ValueError(f"{target} names a {target.value}, not a {role.value}")
    else:
        wants = Role.BROKER if target.kind == "owner" else Role.BOOKIE
        if role is not None and role != wants:
            raise ValueError(f"{target} names a {wants.value}, not a {role.value}")
        topic_cluster(topo, target.value)


def check_all(topo: Topology, texts: tuple[str, ...] | list[str], role: Role | None = None) -> list[Target]:
    """Parse and check every target; at least one is needed."""
    if not texts:
        raise ValueError("needs at least one node or target (NAME, owner:TOPIC, ensemble:TOPIC, region:R, down:ROLE)")
    out = [parse(t) for t in texts]
    for t in out:
        check(topo, t, role)
    return out


def node_by_address(cluster: Endpoints, role: Role) -> dict[str, str]:
    """``address`` -> node name, for nodes of ``role``."""
    return {e.address: e.name for e in cluster.endpoints() if e.role == role.value}


def owner(cluster: Endpoints, topic: str) -> str:
    """The node name of the broker owning ``topic`` now."""
    admin = admin_of(cluster, topic_cluster(cluster.topo, topic))
    host = admin.lookup(topic).host
    name = node_by_address(cluster, Role.BROKER).get(host)
    if name is None:
        raise StateError(f"{topic} is owned by {host}, which is no broker of this deployment")
    return name


def ensemble(cluster: Endpoints, topic: str) -> list[str]:
    """Node names of the bookies of the last ensemble of the topic's newest ledger (in ensemble order)."""
    admin = admin_of(cluster, topic_cluster(cluster.topo, topic))
    ledgers = [led for led in admin.ledgers(topic) if led.ensembles]
    if not ledgers:
        raise StateError(f"{topic} has no ledger with a known ensemble yet (does it exist, has it been written to?)")
    newest = max(ledgers, key=lambda led: led.ledger_id)
    bookies = newest.ensembles[max(newest.ensembles)]
    names = node_by_address(cluster, Role.BOOKIE)
    out = []
    for bookie_id in bookies:
        name = names.get(id_address(bookie_id))
        if name is None:
            raise StateError(f"ledger {newest.ledger_id} of {topic} is on bookie {bookie_id}, unknown to this deployment")
        out.append(name)
    return out


def resolve(cluster: Endpoints, target: Target) -> list[str]:
    """The node names ``target`` stands for right now (``ensemble:`` gives its first bookie)."""
    if target.kind == "node":
        return [target.value]
    if target.kind == "region":
        return [n.name for n in cluster.topo.nodes if n.region == target.value]
    if target.kind == "owner":
        return [owner(cluster, target.value)]
    if target.kind == "down":
        down = [n.name for n in cluster.topo.nodes if n.role == Role(target.value) and not cluster.alive(n.name)]
        if not down:
            raise StateError(f"{target}: every {target.value} is running")
        return down
    return ensemble(cluster, target.value)[:1]


def resolve_all(cluster: Endpoints, texts: tuple[str, ...] | list[str]) -> list[str]:
    """Every node the targets stand for now, each once, in order."""
    out: list[str] = []
    for t in texts:
        for name in resolve(cluster, parse(t)):
            if name not in out:
                out.append(name)
    return out


def describe(texts: tuple[str, ...] | list[str], names: list[str]) -> str:
    """``owner:T -> pulsar1-eu`` style text for a fault's record (plain names as they are)."""
    resolved = [t for t in texts if parse(t).kind != "node"]
    return ", ".join(names) + (f" ({', '.join(resolved)})" if resolved else "")
