"""A cluster pulsarlab did not start (``compose/*.yml`` under plain Compose, hosts deployed by other
means), attached by its topology so that inspect, configure, workload, verify and monitoring work
against it. pulsarlab never controls its nodes: node commands are refused, and ``down`` only
forgets the attachment."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from pulsarlab.deployment import Say, quiet
from pulsarlab.distribution import Distribution
from pulsarlab.errors import UsageError
from pulsarlab.render import write_topology
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.state import ClusterState
from pulsarlab.runtime.waits import wait_for
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Role, Topology

MAIN_PORT = {Role.ZOOKEEPER: "client", Role.BOOKIE: "bookie", Role.BROKER: "service"}


class ExternalCluster(NodeRuntime):
    """The topology's nodes, running wherever something else started them."""

    runtime = "external"

    def __init__(self, topo: Topology, state_dir: Path, dist: Distribution | None = None, say: Say = quiet):
        super().__init__(topo, state_dir, dist, say)

    def _refuse(self, what: str):
        return UsageError(f"cannot {what}: cluster {self.topo.name!r} was attached, not started, by pulsarlab; "
                          "control its nodes where they were started (e.g. docker compose)")

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
        monitoring = self.state_dir / "monitoring"
        ClusterState.path(self.state_dir).unlink(missing_ok=True)
        (self.state_dir / "topology.yaml").unlink(missing_ok=True)
        if not keep_data:
            shutil.rmtree(monitoring, ignore_errors=True)
        self.say(f"detached from {self.topo.name}; its nodes keep running")
        return []

    # ----- primitives ----------------------------------------------------------------------------
    def node_alive(self, name: str) -> bool:
        node = self.topo.node(name)
        try:
            with socket.create_connection((self.topo.address_of(node), node.port(MAIN_PORT[node.role])), timeout=2):
                return True
        except OSError:
            return False

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        return None, self.node_alive(name), False

    def log_file(self, name: str) -> Path | None:
        return None

    def prepare(self, nodes: list[Node]) -> None:
        raise self._refuse("start nodes")

    def spawn(self, node: Node) -> None:
        raise self._refuse(f"start {node.name}")

    def stop_process(self, name: str, kill: bool) -> None:
        raise self._refuse(f"stop {name}")

    def pause_process(self, name: str, paused: bool) -> None:
        raise self._refuse(f"pause or resume {name}")

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        raise self._refuse("initialize cluster metadata")

    def wipe_data(self) -> None:
        raise self._refuse("remove data")

    def wipe_node(self, node: Node) -> None:
        raise self._refuse(f"remove {node.name}'s data")

    def up(self, check=None, seed=None, before_brokers=None, brokers_ready=None):
        raise self._refuse("bring it up")
