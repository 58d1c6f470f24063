"""The ids Pulsar and BookKeeper know nodes by, and back from an id to the node's address.

A bookie's id is ``address:bookie-port`` (``useHostNameAsBookieID=false`` in bookkeeper.conf): it
is what the bookie registers under, what ledger ensembles list, the key of its rack in the rack
map and the name of its cookie. A broker registers as ``address:web-port``.
"""

from __future__ import annotations

from pulsarlab.topology.model import Node, Role, Topology


def bookie_id(topo: Topology, node: Node) -> str:
    if node.role != Role.BOOKIE:
        raise ValueError(f"{node.name} is a {node.role.value}, not a bookie: it has no bookie id")
    return f"{topo.address_of(node)}:{node.port('bookie')}"


def broker_id(topo: Topology, node: Node) -> str:
    if node.role != Role.BROKER:
        raise ValueError(f"{node.name} is a {node.role.value}, not a broker: it has no broker id")
    return f"{topo.address_of(node)}:{node.port('web')}"


def id_address(node_id: str) -> str:
    """``127.0.1.2:3181`` -> ``127.0.1.2`` (``[::1]:3181`` -> ``[::1]``)."""
    return node_id.rsplit(":", 1)[0]
