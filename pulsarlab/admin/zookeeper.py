"""A ZooKeeper session of pulsarlab's own, for the few things written in the metadata store directly
rather than through a broker: the rack map before any broker runs, a bookie's cookie removed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from kazoo.client import KazooClient

from pulsarlab.errors import StateError
from pulsarlab.topology import Topology

ZK_TIMEOUT_S = 15.0


@contextlib.contextmanager
def session(topo: Topology, purpose: str) -> Iterator[KazooClient]:
    """A started client of the topology's ZooKeeper, stopped on exit; a StateError naming ``purpose``
    (``to write the rack map``) when it cannot connect."""
    zk = KazooClient(hosts=topo.zookeeper_connect(), timeout=ZK_TIMEOUT_S)
    try:
        zk.start(timeout=ZK_TIMEOUT_S)
    except Exception as exc:  # kazoo raises its own timeout type
        raise StateError(f"cannot reach ZooKeeper at {topo.zookeeper_connect()} {purpose}: "
                         f"{exc or type(exc).__name__}") from None
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()
