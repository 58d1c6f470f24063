"""Topologies: the typed model, its validation, and the built-in designs."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

# what a role may be granted on a namespace (Pulsar's AuthAction names): here, not in the model, so
# the CLI's help can name them without loading pydantic
GRANT_ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")

# the model (pydantic) loads when one of its names is first used: the CLI's start and its help
# need the built-in names only
_FROM = {
    **dict.fromkeys(("bookie_id", "broker_id", "id_address"), "ids"),
    **dict.fromkeys(("Cluster", "IsolationPolicy", "Namespace", "Node", "Persistence", "Role", "Security", "Tenant",
                     "Topology", "namespace_clusters", "parse", "validate"), "model"),
    **dict.fromkeys(("cluster_namespace", "home_cluster", "namespace_of", "topic_cluster", "topic_clusters",
                     "topic_namespace"), "topics"),
}


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    globals()[name] = value
    return value


BUILTIN_DIR = Path(__file__).parent / "builtin"
LOCALHOST = "127.0.0.1"
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
    "bound_to",
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
    import yaml

    from pulsarlab.errors import TopologyError, yaml_problem
    from pulsarlab.topology.model import parse

    if ref in BUILTINS:
        path = BUILTIN_DIR / f"{ref}.yaml"
    else:
        path = Path(ref)
        if not path.is_file():
            raise TopologyError("topology", f"{ref!r} is neither a built-in ({', '.join(BUILTINS)}) nor a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TopologyError("topology", f"not valid YAML: {yaml_problem(path, exc)}") from None
    if not isinstance(data, dict):
        raise TopologyError("<root>", f"{path} must hold a mapping")
    return own_files_resolved(parse(data, loopback), path.parent)


def own_files_resolved(topo: Topology, base: Path) -> Topology:
    """The topology with the security files it names as absolute paths (a relative one is read
    from ``base``, the topology file's folder), each checked to be a readable file."""
    from pulsarlab.errors import TopologyError

    sec = topo.security
    if sec is None or not sec.own_files():
        return topo
    resolved = {}
    for field, value in sec.own_files().items():
        path = (base / Path(value).expanduser()).resolve()
        if not path.is_file() or not os.access(path, os.R_OK):
            raise TopologyError(f"security.{field}", f"{value!r} is not a readable file (looked for {path})")
        resolved[field] = str(path)
    return topo.model_copy(update={"security": sec.model_copy(update=resolved)})


def builtin_descriptions() -> dict[str, str]:
    return {name: load(name).description for name in BUILTINS}


def bound_to(topo: Topology, address: str) -> Topology:
    """The topology with its one broker on ``address`` (``localhost`` is 127.0.0.1), at its own
    ports: ``pulsar://ADDRESS:6650`` and ``http://ADDRESS:8080`` by default, where ``pulsar
    standalone`` answers, so client test suites written against standalone find it. Only a
    topology with one broker can be bound (two brokers cannot share an address and ports); the
    address must be a loopback one, like every node's."""
    from pulsarlab.errors import TopologyError
    from pulsarlab.topology.model import Role, validate

    brokers = topo.nodes_of(Role.BROKER)
    if len(brokers) != 1:
        raise TopologyError("nodes", f"--bind puts the one broker of a topology on an address; {topo.name!r} has "
                                     f"{len(brokers)} brokers (give each an address in the topology file instead)")
    bound = topo.model_copy(deep=True)
    bound.node(brokers[0].name).address = LOCALHOST if address == "localhost" else address
    validate(bound)
    return bound
