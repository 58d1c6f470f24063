"""Which namespace a topic is in and which clusters serve it: the one rule every command uses.

A topic of a namespace the topology names lives on that namespace's clusters (explicit, or every
cluster its tenant is allowed on) and is owned by the first of them. A topic of a namespace the
topology does not name (``public/default``) exists on every cluster; it has an owner only when
there is a single cluster.
"""

from __future__ import annotations

from pulsarlab.topology.model import Namespace, Topology, namespace_clusters

DEFAULT_NAMESPACE = "public/default"


def namespace_of(topic: str) -> str:
    """``persistent://t/n/x`` (or ``non-persistent://``, or a bare ``t/n/x``) -> ``t/n``."""
    return "/".join(topic.split("://", 1)[-1].split("/")[:2])


def topic_namespace(topo: Topology, topic: str) -> Namespace | None:
    """The topology's namespace ``topic`` is in, or None."""
    name = namespace_of(topic)
    return next((ns for ns in topo.namespaces if ns.name == name), None)


def topic_clusters(topo: Topology, topic: str) -> list[str]:
    """Every cluster ``topic`` lives on: its namespace's, or all of them outside the topology's namespaces."""
    ns = topic_namespace(topo, topic)
    return namespace_clusters(topo, ns) if ns is not None else [c.name for c in topo.clusters]


def home_cluster(topo: Topology, ns: Namespace) -> str:
    """The first cluster of a namespace: it owns the namespace's topics, and its persistence is the
    namespace's when the namespace sets none."""
    return namespace_clusters(topo, ns)[0]  # validation: a namespace lives on at least one cluster


def topic_cluster(topo: Topology, topic: str) -> str:
    """The cluster that serves ``topic`` (its owner's); ``ValueError`` when several could."""
    ns = topic_namespace(topo, topic)
    if ns is not None:
        return home_cluster(topo, ns)
    if len(topo.clusters) == 1:
        return topo.clusters[0].name
    known = ", ".join(n.name for n in topo.namespaces) or "none"
    raise ValueError(f"topic {topic} is not in a namespace of topology {topo.name!r}, whose clusters are several: "
                     f"which serves it is unknown (namespaces: {known})")


def cluster_namespace(topo: Topology, cluster: str) -> str:
    """The topology's first namespace on ``cluster`` (where its default topics go), else ``public/default``."""
    return next((ns.name for ns in topo.namespaces if cluster in namespace_clusters(topo, ns)), DEFAULT_NAMESPACE)
