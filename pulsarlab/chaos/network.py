"""Network faults: ``partition R1 R2``, ``isolate-zk TARGET``, ``mute TARGET`` and ``heal``.

The nodes keep running; packets between chosen nodes are dropped, so connections stall and new
ones time out, as across a cut link. Nodes on this machine are told apart by the sending node's
cgroup and the receiving node's address (this machine's filter, see
:mod:`pulsarlab.chaos.netfilter`); nodes on hosts of their own (:class:`HostFilters`) by
addresses, in each host's own filter. ``heal`` removes every rule this deployment added, and only
those, wherever they are.
"""

from __future__ import annotations

import shutil
import subprocess

from pulsarlab.chaos import netfilter, targets
from pulsarlab.chaos.actions import Done, register
from pulsarlab.chaos.nodes import no_args
from pulsarlab.chaos.outages import region_nodes
from pulsarlab.deployment import Endpoints, HostFilters, NodeControl
from pulsarlab.errors import StateError
from pulsarlab.topology import Role

NETWORK_ACTIONS = frozenset({"partition", "isolate-zk", "mute", "heal"})
"""The actions that change packet filters (a target must let them: see ``preflight(network=True)``)."""


def addresses(cluster: Endpoints, names: list[str]) -> list[str]:
    """The addresses of the named nodes (``endpoints()`` is where a deployment says them)."""
    by_name = {e.name: e.address for e in cluster.endpoints()}
    return sorted({by_name[n] for n in names})


def members(cluster: NodeControl, names: list[str]) -> list[netfilter.Member]:
    """The named nodes as a cut sees them: each one's own cgroup and its address. Refused, naming
    the node, when a node's traffic cannot be told apart from the others' (a rule would then cut
    nothing, or everything)."""
    if problem := cluster.cut_problem():
        raise StateError(f"cannot cut {', '.join(names)} off: {problem}")
    by_name = {e.name: e.address for e in cluster.endpoints()}
    groups = {e.name: cluster.traffic_cgroup(e.name) for e in cluster.endpoints()}
    out = []
    for n in names:
        group = groups[n]
        shared = sorted(m for m, g in groups.items() if g == group and m != n)
        if not group or shared:
            why = "its process is not running" if group is None else (
                "it shares its cgroup with " + ", ".join(shared) if group and shared else "it runs in the root cgroup")
            raise StateError(f"cannot cut {n} off: network faults match each node's own cgroup (v2) and {why}; "
                             "start the cluster as root on a host with cgroup v2 (pulsarlab then starts every "
                             "node in a cgroup of its own)")
        out.append(netfilter.Member(group, by_name[n]))
    return out


# where clients (the workload, pulsarlab itself) connect from: on loopback, whatever node address
# they connect to, their packets leave from 127.0.0.1, so that is where a node's replies go
CLIENT_ADDRESS = "127.0.0.1"


def partition_rules(cluster: NodeControl, region_a: str, region_b: str) -> list[netfilter.Rule]:
    ident = netfilter.identity(cluster.state_dir)
    return netfilter.cut(ident, f"partition {region_a} {region_b}",
                         members(cluster, region_nodes(cluster, region_a)),
                         members(cluster, region_nodes(cluster, region_b)))


def _zookeepers_but(cluster: NodeControl, node: str) -> list[str]:
    zks = [n.name for n in cluster.topo.nodes_of(Role.ZOOKEEPER)]
    if node in zks:
        raise StateError(f"isolate-zk: {node} is a ZooKeeper node itself")
    return zks


def isolate_rules(cluster: NodeControl, node: str) -> list[netfilter.Rule]:
    zks = _zookeepers_but(cluster, node)
    ident = netfilter.identity(cluster.state_dir)
    return netfilter.cut(ident, f"isolate-zk {node}", members(cluster, [node]), members(cluster, zks))


def isolate_host_rules(cluster: NodeControl, node: str) -> dict[str, list[str]]:
    zks = _zookeepers_but(cluster, node)
    return netfilter.host_cut(netfilter.identity(cluster.state_dir), f"isolate-zk {node}",
                              _addresses_of(cluster, [node]), _addresses_of(cluster, zks))


def _cuttable(cluster: Endpoints) -> None:
    """Refuse a cut, before anything runs, on a deployment whose traffic this machine's packet
    filter does not see."""
    problem = cluster.cut_problem() if isinstance(cluster, NodeControl) else None
    if problem:
        raise ValueError(f"no network fault on this deployment: {problem}")


def _filter_problem(cluster: Endpoints) -> str | None:
    """Why this machine's iptables cannot be changed, where the deployment's cuts need it."""
    return None if isinstance(cluster, HostFilters) else netfilter.Iptables().usable()


def _two_regions(cluster: Endpoints, args: tuple[str, ...]) -> None:
    _cuttable(cluster)
    if len(args) != 2:
        raise ValueError("needs two regions")
    if args[0] == args[1]:
        raise ValueError(f"needs two different regions (got {args[0]} twice)")
    for r in args:
        targets.check(cluster.topo, targets.Target("region", r))
    if why := _filter_problem(cluster):
        raise ValueError(why)


def _on_hosts(cluster: HostFilters, rules: dict[str, list[str]], what: str, nodes: tuple[str, ...]) -> Done:
    """Add each host's rules; ``<what>: N DROP rules on M hosts (K new)``, at when the last host had them."""
    added, at_ns = cluster.add_host_rules(rules)
    total = sum(len(r) for r in rules.values())
    note = netfilter.host_rule_comment(next(iter(rules.values()))[0])
    return Done(f"{what}: {total} DROP rule(s) on {len(rules)} host(s) ({added} new), comment '{note}'", nodes, at_ns)


def _addresses_of(cluster: Endpoints, names: list[str]) -> dict[str, str]:
    return {n: cluster.topo.address_of(cluster.topo.node(n)) for n in names}


def partition(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Drop every packet between the two regions' node addresses, both ways."""
    if isinstance(cluster, HostFilters):
        a, b = region_nodes(cluster, args[0]), region_nodes(cluster, args[1])
        per_host = netfilter.host_cut(netfilter.identity(cluster.state_dir), f"partition {args[0]} {args[1]}",
                                      _addresses_of(cluster, a), _addresses_of(cluster, b))
        return _on_hosts(cluster, per_host, f"partitioned {args[0]} from {args[1]}", tuple(a + b))
    rules = partition_rules(cluster, *args)
    added = netfilter.Iptables().add(rules)
    return Done(f"partitioned {args[0]} from {args[1]}: {len(rules)} DROP rules in iptables {netfilter.CHAIN} "
                f"({added} new), comment '{rules[0].comment}'",
                tuple(region_nodes(cluster, args[0]) + region_nodes(cluster, args[1])))


def _one_non_zk_target(cluster: Endpoints, args: tuple[str, ...]) -> None:
    if len(args) != 1:
        raise ValueError("needs one node or target (NAME, owner:TOPIC, ensemble:TOPIC)")
    t = targets.check_all(cluster.topo, args)[0]
    if t.kind == "region":
        raise ValueError("takes one node, not a region (a region's ZooKeeper node cannot be cut from itself)")
    if t.kind == "node" and cluster.topo.node(t.value).role == Role.ZOOKEEPER:
        raise ValueError(f"{t.value} is a ZooKeeper node itself")
    if why := _filter_problem(cluster):
        raise ValueError(why)


def _cut_one(cluster: NodeControl, args: tuple[str, ...], rules_of, host_rules_of, what: str) -> Done:
    """Resolve the one target, add its rules, and say ``<what>: N DROP rule(s) (M new), comment``."""
    node = targets.resolve_all(cluster, args)[0]
    if isinstance(cluster, HostFilters):
        return _on_hosts(cluster, host_rules_of(cluster, node), what.format(node=targets.describe(args, [node])), (node,))
    rules = rules_of(cluster, node)
    added = netfilter.Iptables().add(rules)
    return Done(f"{what.format(node=targets.describe(args, [node]))}: {len(rules)} DROP rule(s) "
                f"({added} new), comment '{rules[0].comment}'", (node,))


def isolate_zk(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Drop the node's packets to and from every ZooKeeper node."""
    return _cut_one(cluster, args, isolate_rules, isolate_host_rules, "isolated {node} from ZooKeeper")


def mute_host_rules(cluster: NodeControl, node: str) -> dict[str, list[str]]:
    n = cluster.topo.node(node)
    return netfilter.host_mute(netfilter.identity(cluster.state_dir), f"mute {node}", node,
                               [n.port(kind) for kind in cluster.topo.port_kinds(n)])


def mute_rules(cluster: NodeControl, node: str) -> list[netfilter.Rule]:
    ident = netfilter.identity(cluster.state_dir)
    [member] = members(cluster, [node])
    return [netfilter.Rule(member.cgroup, CLIENT_ADDRESS, netfilter.comment(ident, f"mute {node}"))]


def mute(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Drop everything the node sends back to clients, while it keeps talking to the other nodes."""
    clients = "this machine" if isinstance(cluster, HostFilters) else CLIENT_ADDRESS
    return _cut_one(cluster, args, mute_rules, mute_host_rules, f"muted {{node}}, its replies to clients ({clients}) dropped")


def disconnect(cluster: Endpoints, args: tuple[str, ...]) -> Done:
    """Destroy every client connection to the broker's service port (``ss -K``), as a network blip
    would: each client sees its connection fail, reconnects and resends what it has pending."""
    node = targets.resolve_all(cluster, args)[0]
    n = cluster.topo.node(node)
    if n.role != Role.BROKER:
        raise StateError(f"disconnect: {node} is not a broker")
    address, port = cluster.topo.address_of(n), n.port("service")
    try:
        done = subprocess.run(["ss", "-K", "-t", "dst", address, "dport", "=", f":{port}"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StateError(f"disconnect {node}: ss -K failed: {exc}") from None
    if done.returncode != 0:
        raise StateError(f"disconnect {node}: ss -K exited {done.returncode}: {done.stderr.strip()[-300:]}")
    closed = sum(1 for line in done.stdout.splitlines()[1:] if line.strip())
    return Done(f"disconnected {targets.describe(args, [node])}: {closed} client connection(s) to {address}:{port} "
                "destroyed", (node,))


def _one_cut_target(cluster: Endpoints, args: tuple[str, ...]) -> None:
    _cuttable(cluster)
    _one_non_zk_target(cluster, args)


def _one_broker(cluster: Endpoints, args: tuple[str, ...]) -> None:
    _one_non_zk_target(cluster, args)
    if shutil.which("ss") is None:
        raise ValueError("'ss' (iproute2) is not installed: disconnect destroys connections with ss -K")


def heal(cluster: Endpoints, args: tuple[str, ...]) -> Done:
    """Remove every packet filter rule of this deployment."""
    if isinstance(cluster, HostFilters):
        ident = netfilter.identity(cluster.state_dir)
        gone, dropped = cluster.remove_host_rules(ident)
        return Done(f"healed: removed {gone} DROP rule(s) of this deployment ({ident}) from its hosts; they had dropped "
                    f"{dropped} packets")
    ipt, ident = netfilter.Iptables(), netfilter.identity(cluster.state_dir)
    dropped = ipt.dropped(ident)
    gone = ipt.remove(ident)
    return Done(f"healed: removed {gone} DROP rule(s) of this deployment ({ident}); they had dropped {dropped} packets")


def remove_all(cluster: Endpoints) -> int:
    """What ``down`` and an ended scenario run: every rule of this deployment removed, from its
    hosts' filters or this machine's (where none can have been added: nothing to do)."""
    if isinstance(cluster, HostFilters):
        return cluster.remove_host_rules(netfilter.identity(cluster.state_dir))[0]
    return netfilter.remove_if_any(cluster.state_dir)


def _heal_check(cluster: Endpoints, args: tuple[str, ...]) -> None:
    no_args(cluster, args)
    if why := _filter_problem(cluster):
        raise ValueError(why)


register("partition", partition, _two_regions)
register("isolate-zk", isolate_zk, _one_cut_target)
register("mute", mute, _one_cut_target)
register("disconnect", disconnect, _one_broker)
register("heal", heal, _heal_check, heals=True)
