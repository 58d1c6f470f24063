"""A cluster pulsarlab did not start (``compose/*.yml`` under plain Compose, hosts deployed by other
means), attached by its topology so that inspect, configure, workload, verify and monitoring work
against it. pulsarlab never controls its nodes: it is :class:`~pulsarlab.deployment.Endpoints`
and no more (no node control to refuse: asking it for some is a type error, and the CLI says so
once, see :func:`pulsarlab.ops.node_control`), and ``down`` only forgets the attachment."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from pulsarlab.render import write_topology
from pulsarlab.runtime.endpoints import RecordedDeployment
from pulsarlab.runtime.state import ClusterState
from pulsarlab.runtime.waits import wait_for
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Role, Topology

MAIN_PORT = {Role.ZOOKEEPER: "client", Role.BOOKIE: "bookie", Role.BROKER: "service"}


class ExternalCluster(RecordedDeployment):
    """The topology's nodes, running wherever something else started them."""

    runtime = "external"

    # ----- attach / detach ------------------------------------------------------------------------
    def attach(self, wait_s: float | None = None) -> list[str]:
        """Record the attachment after every node answers its readiness probe; return the nodes."""
        for n in self.topo.nodes:
            probe = self.readiness_probe(n)
            wait_for(n.name, probe, what=probe.description, timeout=wait_s if wait_s is not None else timeout(n.role.value))
        ClusterState(name=self.topo.name, runtime=self.runtime, topology_ref=self.topo.name).save(self.state_dir)
        write_topology(self.topo, self.state_dir)
        return [n.name for n in self.topo.nodes]

    def down(self, keep_data: bool = False) -> list[str]:
        """Forget the attachment; the nodes keep running."""
        detach(self.state_dir, keep_data)
        self.say(f"detached from {self.topo.name}; its nodes keep running")
        return []

    # ----- observations ----------------------------------------------------------------------------
    def node_alive(self, name: str) -> bool:
        return answers(self.topo, self.topo.node(name))

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        return None, self.node_alive(name), False


def answers(topo: Topology, node: Node) -> bool:
    """Whether ``node`` accepts a connection on its main port (a paused JVM's kernel still does)."""
    try:
        with socket.create_connection((topo.address_of(node), node.port(MAIN_PORT[node.role])), timeout=2):
            return True
    except OSError:
        return False


def detach(state_dir: Path, keep_data: bool, *also: str) -> None:
    """Forget an attachment recorded in ``state_dir`` (and the files ``also`` names there); its
    monitoring data goes too unless kept. Nothing of the nodes themselves is touched."""
    ClusterState.path(state_dir).unlink(missing_ok=True)
    for name in ("topology.yaml", *also):
        (state_dir / name).unlink(missing_ok=True)
    if not keep_data:
        shutil.rmtree(state_dir / "monitoring", ignore_errors=True)
