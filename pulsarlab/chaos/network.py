"""Network faults: ``partition R1 R2``, ``isolate-zk TARGET`` and ``heal``.

The nodes keep running; packets between chosen addresses are dropped (see
:mod:`pulsarlab.chaos.netfilter`), so connections stall and new ones time out, as across a cut
link. ``heal`` removes every rule this deployment added, and only those.
"""

from __future__ import annotations

from pulsarlab.chaos import netfilter, targets
from pulsarlab.chaos.nodes import no_args
from pulsarlab.chaos.outages import region_nodes
from pulsarlab.chaos.schedule import register
from pulsarlab.deployment import Deployment
from pulsarlab.errors import StateError
from pulsarlab.topology import Role


def addresses(cluster: Deployment, names: list[str]) -> list[str]:
    """The addresses of the named nodes (``endpoints()`` is where a deployment says them)."""
    by_name = {e.name: e.address for e in cluster.endpoints()}
    return sorted({by_name[n] for n in names})


def partition_rules(cluster: Deployment, region_a: str, region_b: str) -> list[netfilter.Rule]:
    ident = netfilter.identity(cluster.state_dir)
    return netfilter.cut(ident, f"partition {region_a} {region_b}",
                         addresses(cluster, region_nodes(cluster, region_a)),
                         addresses(cluster, region_nodes(cluster, region_b)))


def isolate_rules(cluster: Deployment, node: str) -> list[netfilter.Rule]:
    zks = [n.name for n in cluster.topo.nodes_of(Role.ZOOKEEPER)]
    if node in zks:
        raise StateError(f"isolate-zk: {node} is a ZooKeeper node itself")
    ident = netfilter.identity(cluster.state_dir)
    return netfilter.cut(ident, f"isolate-zk {node}", addresses(cluster, [node]), addresses(cluster, zks))


def _two_regions(cluster: Deployment, args: tuple[str, ...]) -> None:
    if len(args) != 2:
        raise ValueError("needs two regions")
    if args[0] == args[1]:
        raise ValueError(f"needs two different regions (got {args[0]} twice)")
    for r in args:
        targets.check(cluster.topo, targets.Target("region", r))
    why = netfilter.Iptables().usable()
    if why:
        raise ValueError(why)


def partition(cluster: Deployment, args: tuple[str, ...]) -> str:
    """Drop every packet between the two regions' node addresses, both ways."""
    rules = partition_rules(cluster, *args)
    added = netfilter.Iptables().add(rules)
    return (f"partitioned {args[0]} from {args[1]}: {len(rules)} DROP rules in iptables {netfilter.CHAIN} "
            f"({added} new), comment '{rules[0].comment}'")


def _one_non_zk_target(cluster: Deployment, args: tuple[str, ...]) -> None:
    if len(args) != 1:
        raise ValueError("needs one node or target (NAME, owner:TOPIC, ensemble:TOPIC)")
    t = targets.check_all(cluster.topo, args)[0]
    if t.kind == "region":
        raise ValueError("takes one node, not a region (a region's ZooKeeper node cannot be cut from itself)")
    if t.kind == "node" and cluster.topo.node(t.value).role == Role.ZOOKEEPER:
        raise ValueError(f"{t.value} is a ZooKeeper node itself")
    why = netfilter.Iptables().usable()
    if why:
        raise ValueError(why)


def isolate_zk(cluster: Deployment, args: tuple[str, ...]) -> str:
    """Drop the node's packets to and from every ZooKeeper node."""
    node = targets.resolve_all(cluster, args)[0]
    rules = isolate_rules(cluster, node)
    added = netfilter.Iptables().add(rules)
    return (f"isolated {targets.describe(args, [node])} from ZooKeeper: {len(rules)} DROP rules "
            f"({added} new), comment '{rules[0].comment}'")


def heal(cluster: Deployment, args: tuple[str, ...]) -> str:
    """Remove every packet filter rule of this deployment."""
    gone = netfilter.Iptables().remove(netfilter.identity(cluster.state_dir))
    return f"healed: removed {gone} DROP rule(s) of this deployment ({netfilter.identity(cluster.state_dir)})"


def _heal_check(cluster: Deployment, args: tuple[str, ...]) -> None:
    no_args(cluster, args)
    why = netfilter.Iptables().usable()
    if why:
        raise ValueError(why)


register("partition", partition, _two_regions)
register("isolate-zk", isolate_zk, _one_non_zk_target)
register("heal", heal, _heal_check)
