"""Apply a topology's desired state to a running cluster over the admin REST API, idempotently.

Read every object, compare it with what the topology wants, write only what differs, then read
everything back and fail loudly on any drift. What is configured, per Pulsar cluster:

* the rack map: every bookie under the id it registered with (``<address>:<bookie port>``) and
  every broker under ``<address>:0``, rack ``<region>/<n>``, group = region. Why ``:0`` for
  brokers: BookKeeper finds a broker's own region by resolving the dummy bookie id
  ``<local address>:0``; an entry ``<address>:<service port>`` (what the blog wrote on 2.3) is not
  a registered bookie, so Pulsar 4.0's rack mapping logs it as unresolvable and ignores it.
* every cluster's registration (its web and broker service URLs), tenants (allowed clusters),
  namespaces (replication clusters), persistence (E/Qw/Qa, mark-delete rate 0) — these live in
  the shared configuration store and are written once. Geo-replication needs each cluster to
  find the others' URLs there: a broker replicating to a cluster connects to the URLs registered
  for it;
* a namespace's ``deduplication`` when the topology sets it (Pulsar's namespace-level broker-side
  deduplication, ``deduplicationEnabled`` of its policies), written once too;
* namespace isolation policies (per cluster): Pulsar matches the regexes against the broker's
  *host* (the load manager turns ``host:port`` into ``http://host:port`` and takes the host), with a
  full match; the ``/brokers`` view matches ``host:port``. The regex written accepts both.

A broker reads its own region once, when its BookKeeper client starts (``myRegion`` in
``RegionAwareEnsemblePlacementPolicy.initialize``); rack changes of *bookies* are applied live
(the mapping watches ``/bookies``). So a broker whose BookKeeper client started with the wrong
region is restarted, one broker at a time, each back to ready before the next.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from pulsarlab.admin.client import AdminClient, admin_of
from pulsarlab.deployment import Endpoints, NodeControl, Say
from pulsarlab.errors import PulsarlabError
from pulsarlab.topology import Node, Role, Topology, bookie_id, home_cluster, namespace_clusters

# BookKeeper logs the placement policy's own node and location when a broker's client starts.
_LOCAL_NODE = re.compile(r"Initialize rackaware ensemble placement policy @ <Bookie:([^>]+)> @ (\S+) ")
_START_MARK = b"===== pulsarlab: starting"
ORDER = ("rack", "cluster", "tenant", "namespace", "permission", "persistence", "deduplication", "isolation",
         "broker-region")
WORKLOAD_ACTIONS = ["consume", "produce"]


class DriftError(PulsarlabError):
    """After applying, the cluster still differs from the topology."""

    def __init__(self, changes: list[Change]) -> None:
        self.changes = changes
        lines = [f"  {c.cluster}: {c.object} {c.field}: is {c.current!r}, wanted {c.desired!r}" for c in changes]
        super().__init__("the cluster drifted from the topology after configure:\n" + "\n".join(lines))


@dataclass(frozen=True)
class Change:
    """One difference between the cluster and the topology, and what fixes it."""

    cluster: str
    object: str
    field: str
    current: Any
    desired: Any
    action: str  # create | update | delete | restart


@dataclass
class Item:
    """One object of the desired state: its identity, the fields the topology decides, what is there."""

    cluster: str
    kind: str
    name: str
    desired: dict[str, Any] | None  # None: the object must not exist
    current: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"

    @property
    def wanted(self) -> dict[str, Any]:
        """The desired fields of an object that must exist."""
        if self.desired is None:
            raise ValueError(f"{self.label} must not exist: it has no desired fields")
        return self.desired


@dataclass
class Report:
    dry_run: bool
    changes: list[Change] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "changes": [asdict(c) for c in self.changes],
            "restarted": self.restarted,
            "seconds": round(self.seconds, 2),
        }


# ----- desired state (pure) ---------------------------------------------------------------------
def broker_rack_id(topo: Topology, node: Node) -> str:
    """The rack-map key through which a broker's BookKeeper client finds its own region."""
    return f"{topo.address_of(node)}:0"


def broker_regex(topo: Topology, node: Node) -> str:
    """Full-match regex for a broker: its host, optionally followed by a port."""
    return re.escape(topo.address_of(node)) + r"(:\d+)?"


def isolation_regexes(topo: Topology, names: list[str]) -> list[str]:
    """Broker names (validated to be brokers of the cluster) or ``*`` (every broker) as regexes."""
    return [".*" if n == "*" else broker_regex(topo, topo.node(n)) for n in names]


def rack_of(topo: Topology, node: Node) -> str | None:
    rack = topo.rack_of(node)
    return rack.strip("/") if rack else None


def desired_state(topo: Topology, cluster: str, with_shared: bool = True) -> list[Item]:
    """Everything ``cluster`` must carry; ``with_shared`` adds the configuration-store objects."""
    c = topo.cluster(cluster)
    items: list[Item] = []
    for role, key in ((Role.BOOKIE, bookie_id), (Role.BROKER, broker_rack_id)):
        for n in topo.nodes_of(role, cluster):
            rack = rack_of(topo, n)
            if rack:
                items.append(Item(cluster, "rack", key(topo, n), {"rack": rack, "group": n.region}))
    if with_shared:
        for other in topo.clusters:
            urls = {"serviceUrl": topo.registered_web_url(other.name), "brokerServiceUrl": topo.service_url(other.name)}
            if topo.tls:  # brokers replicating with brokerClientTlsEnabled dial the *Tls URLs
                urls |= {"serviceUrlTls": urls["serviceUrl"], "brokerServiceUrlTls": urls["brokerServiceUrl"]}
            items.append(Item(cluster, "cluster", other.name, urls))
        for t in topo.tenants:
            items.append(Item(cluster, "tenant", t.name, {"allowedClusters": sorted(t.clusters)}))
        for ns in topo.namespaces:
            items.append(Item(cluster, "namespace", ns.name, {"replication_clusters": sorted(namespace_clusters(topo, ns))}))
            if topo.security is not None:
                items.append(permission_item(topo, cluster, ns.name))
            p = ns.persistence or topo.cluster(home_cluster(topo, ns)).persistence
            items.append(Item(cluster, "persistence", ns.name, {
                "bookkeeperEnsemble": p.ensemble,
                "bookkeeperWriteQuorum": p.write_quorum,
                "bookkeeperAckQuorum": p.ack_quorum,
                "managedLedgerMaxMarkDeleteRate": 0.0,
            }))
            if ns.deduplication is not None:
                items.append(Item(cluster, "deduplication", ns.name, {"deduplicationEnabled": ns.deduplication}))
    for pol in c.isolation:
        items.append(Item(cluster, "isolation", pol.name, {
            "namespaces": sorted(pol.namespaces),
            "primary": sorted(isolation_regexes(topo, pol.primary)),
            "secondary": sorted(isolation_regexes(topo, pol.secondary)),
            "auto_failover_policy": {
                "policy_type": "min_available",
                "parameters": {"min_limit": str(pol.min_limit), "usage_threshold": str(pol.usage_threshold)},
            },
        }))
    return items


def permission_item(topo: Topology, cluster: str, namespace: str) -> Item:
    """On a secure cluster the workload role may produce and consume in every namespace of the
    topology, and each role the namespace's ``grants`` name may take its actions there."""
    assert topo.security is not None
    wanted = {topo.security.workload_role: WORKLOAD_ACTIONS}
    for ns in topo.namespaces:
        if ns.name == namespace:
            for role, actions in ns.grants.items():
                wanted[role] = sorted({*wanted.get(role, []), *actions})
    return Item(cluster, "permission", namespace, wanted)


def diff(item: Item) -> list[Change]:
    """The field-by-field differences of one item (only the fields the topology decides)."""
    if item.desired is None:
        if item.current is None:
            return []
        return [Change(item.cluster, item.label, "*", item.current, None, "delete")]
    action = "create" if item.current is None else ("restart" if item.kind == "broker-region" else "update")
    current = item.current or {}
    return [
        Change(item.cluster, item.label, k, current.get(k), want, action)
        for k, want in item.desired.items()
        if normalize(current.get(k)) != normalize(want)
    ]


def normalize(value: Any) -> Any:
    """Compare lists as sets, numbers as floats, and mappings recursively."""
    if isinstance(value, list):
        return sorted((normalize(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    return value


# ----- reading the cluster ---------------------------------------------------------------------
def read_state(admin: AdminClient, cluster: str, items: list[Item]) -> list[Item]:
    """Fill ``current`` of every item; add items (desired None) for objects the topology lacks."""
    racks = admin.racks()
    policies = admin.isolation_policies(cluster)
    for it in items:
        if it.kind == "rack":
            entry = racks.get(it.name)
            it.current = {"rack": entry.rack.strip("/"), "group": entry.group} if entry else None
        elif it.kind == "cluster":
            it.current = admin.cluster_data(it.name)
        elif it.kind == "tenant":
            info = admin.tenant(it.name)
            it.current = None if info is None else {**info, "allowedClusters": sorted(info.get("allowedClusters") or [])}
        elif it.kind == "namespace":
            pol = admin.namespace_policies(it.name)
            it.current = None if pol is None else {"replication_clusters": sorted(pol.get("replication_clusters") or [])}
        elif it.kind == "permission":
            it.current = admin.permissions(it.name)
        elif it.kind == "persistence":
            it.current = admin.persistence(it.name)
        elif it.kind == "deduplication":
            pol = admin.namespace_policies(it.name)
            it.current = None if pol is None else {"deduplicationEnabled": pol.get("deduplicationEnabled")}
        elif it.kind == "isolation":
            it.current = policies.get(it.name)
    racks_wanted = {i.name for i in items if i.kind == "rack"}
    policies_wanted = {i.name for i in items if i.kind == "isolation"}
    extra = [Item(cluster, "rack", b, None, {"rack": e.rack, "group": e.group})
             for b, e in sorted(racks.items()) if b not in racks_wanted]
    extra += [Item(cluster, "isolation", n, None, p) for n, p in sorted(policies.items()) if n not in policies_wanted]
    return items + extra


def broker_region_seen(cluster: NodeControl, node: Node) -> str | None:
    """The region the running broker's BookKeeper client believes it is in (from its log);
    ``"UnknownRegion"`` when it started without a rack, None when the log does not say (yet)."""
    path = cluster.log_file(node.name)
    if path is None or not path.is_file():
        return None
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        fh.seek(max(0, fh.tell() - 16 * 1024 * 1024))
        data = fh.read()
    segment = data[data.rfind(_START_MARK):] if _START_MARK in data else data
    found = _LOCAL_NODE.findall(segment.decode("utf-8", "replace"))
    if not found:
        return None
    parts = [p for p in found[-1][1].split("/") if p]
    return parts[0] if len(parts) >= 2 and parts[0] != "default-region" else "UnknownRegion"


def broker_items(cluster: NodeControl, name: str) -> list[Item]:
    """One item per running broker of ``name``: the region its placement policy started with."""
    topo = cluster.topo
    out = []
    for n in topo.nodes_of(Role.BROKER, name):
        if rack_of(topo, n) and cluster.log_file(n.name) is not None and cluster.alive(n.name):
            seen = broker_region_seen(cluster, n)
            out.append(Item(name, "broker-region", n.name, {"region": n.region},
                            {"region": seen} if seen is not None else {"region": None}))
    return out


# ----- writing -----------------------------------------------------------------------------------
def apply_item(admin: AdminClient, it: Item) -> None:
    """Write one differing item (the caller has checked that it differs)."""
    if it.kind == "rack":
        if it.desired is None:
            admin.delete_rack(it.name)
        else:
            admin.set_rack(it.name, it.desired["group"], it.desired["rack"])
    elif it.kind == "cluster":
        # an update replaces the whole registration: keep the fields the topology does not decide
        admin.put_cluster(it.name, {**(it.current or {}), **it.wanted}, create=it.current is None)
    elif it.kind == "tenant":
        merged = {"adminRoles": [], **(it.current or {}), **it.wanted}
        admin.put_tenant(it.name, merged, create=it.current is None)
    elif it.kind == "namespace":
        if it.current is None:
            admin.create_namespace(it.name, dict(it.wanted))
        else:
            admin.set_replication(it.name, it.wanted["replication_clusters"])
    elif it.kind == "permission":
        for role, actions in it.wanted.items():
            admin.grant(it.name, role, actions)
    elif it.kind == "persistence":
        admin.set_persistence(it.name, it.wanted)
    elif it.kind == "deduplication":
        admin.set_deduplication(it.name, it.wanted["deduplicationEnabled"])
    elif it.kind == "isolation":
        if it.desired is None:
            admin.request("DELETE", f"/admin/v2/clusters/{it.cluster}/namespaceIsolationPolicies/{it.name}")
        else:
            admin.set_isolation_policy(it.cluster, it.name, it.desired)
    else:  # pragma: no cover - broker-region is handled by a restart
        raise ValueError(it.kind)


def unload_namespaces(admin: AdminClient, namespaces: set[str], say: Say) -> None:
    """New placement and persistence apply to new ledgers and new ownership: unload what changed."""
    for ns in sorted(namespaces):
        admin.request("PUT", f"/admin/v2/namespaces/{ns}/unload", idempotent=True, ok_statuses=(404,))
        say(f"namespace {ns} unloaded so the new policies apply")


def rolling_restart(cluster: NodeControl, brokers: list[str], say: Say) -> None:
    """Restart brokers one at a time, each ready (and in its region) before the next one stops."""
    for name in brokers:
        say(f"{name}: restarting so its BookKeeper client learns its region")
        cluster.stop_node(name)
        cluster.start_node(name)


def restart_stale_brokers(cluster: NodeControl, name: str, report: Report, say: Say) -> None:
    """Brokers of ``name`` that started without knowing their region: reported, and restarted
    one at a time unless ``report`` is a dry run."""
    stale = [it for it in broker_items(cluster, name) if diff(it)]
    for it in stale:
        report.changes += diff(it)
    if stale and not report.dry_run:
        rolling_restart(cluster, [it.name for it in stale], say)
        report.restarted += [it.name for it in stale]
        left = [ch for it in broker_items(cluster, name) for ch in diff(it)]
        if left:
            raise DriftError(left)


def _quiet(_msg: str) -> None:
    pass


def configure(cluster: Endpoints, dry_run: bool = False, say: Say = _quiet, brokers: bool = True) -> Report:
    """Reconcile every Pulsar cluster of the topology; return the differences found (and fixed).
    ``brokers=False`` leaves out the brokers' regions (:func:`settle_brokers`), for a configure
    that runs while some brokers are still starting: their logs do not say it yet."""
    t0 = time.monotonic()
    report = Report(dry_run)
    topo = cluster.topo
    for i, c in enumerate(topo.clusters):
        admin = admin_of(cluster, c.name)
        items = read_state(admin, c.name, desired_state(topo, c.name, with_shared=i == 0))
        items.sort(key=lambda it: ORDER.index(it.kind))
        todo = [(it, d) for it in items if (d := diff(it))]
        for _, d in todo:
            report.changes += d
        if not dry_run:
            touched: set[str] = set()
            for it, _ in todo:
                apply_item(admin, it)
                say(f"{c.name}: {it.label}: {'deleted' if it.desired is None else 'applied'}")
                if it.kind in ("persistence", "isolation") and it.desired:
                    touched |= {it.name} if it.kind == "persistence" else set(it.desired["namespaces"])
            # read back every object, not only the ones written
            left = [ch for it in read_state(admin, c.name, desired_state(topo, c.name, with_shared=i == 0))
                    for ch in diff(it)]
            if left:
                raise DriftError(left)
            if touched:
                unload_namespaces(admin, touched, say)
        # only a runtime that started the brokers reads their logs and restarts them; an attached
        # cluster's own start order must put the racks first (compose/*.yml does)
        if brokers and isinstance(cluster, NodeControl):
            restart_stale_brokers(cluster, c.name, report, say)
    report.seconds = time.monotonic() - t0
    return report


def settle_brokers(cluster: NodeControl, say: Say = _quiet) -> Report:
    """The brokers' regions, every cluster: what :func:`configure` leaves out with ``brokers=False``."""
    t0 = time.monotonic()
    report = Report(False)
    for c in cluster.topo.clusters:
        restart_stale_brokers(cluster, c.name, report, say)
    report.seconds = time.monotonic() - t0
    return report
