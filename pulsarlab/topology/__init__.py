"""Topologies: the typed model, its validation, and the built-in designs."""

from __future__ import annotations

from pathlib import Path

import yaml

from pulsarlab.errors import TopologyError
from pulsarlab.topology.ids import bookie_id, broker_id, id_address
from pulsarlab.topology.model import (
    Cluster,
    IsolationPolicy,
    Namespace,
    Node,
    Persistence,
    Role,
    Security,
    Tenant,
    Topology,
    namespace_clusters,
    parse,
    validate,
)
from pulsarlab.topology.topics import (
    cluster_namespace,
    home_cluster,
    namespace_of,
    topic_cluster,
    topic_clusters,
    topic_namespace,
)

BUILTIN_DIR = Path(__file__).parent / "builtin"
BUILTINS = ("smoke", "sync", "geo", "active-active")

__all__ = [
    "BUILTINS",
    "Cluster",
    "IsolationPolicy",
    "Namespace",
    "Node",
    "Persistence",
    "Role",
    "Security",
    "Tenant",
    "Topology",
    "bookie_id",
    "broker_id",
    "builtin_descriptions",
    "cluster_namespace",
    "home_cluster",
    "id_address",
    "load",
    "namespace_clusters",
    "namespace_of",
    "parse",
    "topic_cluster",
    "topic_clusters",
    "topic_namespace",
    "validate",
]


def load(ref: str, loopback: bool = True) -> Topology:
    """Load a topology by built-in name or from a YAML file path (``loopback``: see :func:`parse`)."""
    if ref in BUILTINS:
        path = BUILTIN_DIR / f"{ref}.yaml"
    else:
        path = Path(ref)
        if not path.is_file():
            raise TopologyError("topology", f"{ref!r} is neither a built-in ({', '.join(BUILTINS)}) nor a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TopologyError("topology", f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise TopologyError("<root>", f"{path} must hold a mapping")
    return parse(data, loopback)


def builtin_descriptions() -> dict[str, str]:
    return {name: load(name).description for name in BUILTINS}
