"""What every deployment's runtime shares, whether or not it controls the nodes: the recorded
state, each node's endpoints and readiness probe, client credentials and status.

:class:`RecordedDeployment` implements :class:`pulsarlab.deployment.Endpoints`. A runtime that
acts on nodes builds on it (:class:`pulsarlab.runtime.base.NodeRuntime`); an attached cluster
(:mod:`pulsarlab.runtime.external`) uses it as it is, with no control primitive to refuse.
"""

from __future__ import annotations

import abc
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self

import yaml

from pulsarlab.deployment import NodeEndpoint, NodeStatus, Say, quiet
from pulsarlab.distribution import Distribution
from pulsarlab.distribution import resolve as resolve_distribution
from pulsarlab.errors import PulsarlabError, StateError, yaml_problem
from pulsarlab.progress import reporter_of
from pulsarlab.runtime import versions
from pulsarlab.runtime.state import ClusterState
from pulsarlab.runtime.waits import HttpOk, ZkServing
from pulsarlab.security import ClientAuth
from pulsarlab.security import files as security_files
from pulsarlab.topology import Node, Role, Topology, parse


class RecordedDeployment(abc.ABC):
    """A topology recorded under ``state_dir`` (see :class:`pulsarlab.deployment.Endpoints`)."""

    runtime = "?"

    def __init__(self, topo: Topology, state_dir: Path, dist: Distribution | None = None, say: Say = quiet):
        self.topo = topo
        self.state_dir = state_dir.resolve()
        self.dist = dist
        self.say = reporter_of(say)  # a Reporter: steps with a status and an end, and notes
        self._lock = threading.Lock()
        self.state = ClusterState.load(self.state_dir) or ClusterState(topo.name, self.runtime, topo.name)

    on_loopback = True  # every node on an address of this machine (False: hosts of their own)

    @classmethod
    def open(cls, state_dir: Path, dist: Distribution | None = None, say: Say = quiet) -> Self:
        """The deployment recorded in ``state_dir`` (as ``up`` or ``attach`` left it)."""
        topo_file = state_dir / "topology.yaml"
        if not ClusterState.path(state_dir).is_file() or not topo_file.is_file():
            raise StateError(f"no pulsarlab cluster in {state_dir}: run 'pulsarlab up' first")
        try:
            topo = parse(yaml.safe_load(topo_file.read_text()), loopback=cls.on_loopback)
        except (yaml.YAMLError, PulsarlabError) as exc:  # a file edited or cut short by hand
            why = yaml_problem(topo_file, exc) if isinstance(exc, yaml.YAMLError) else str(exc).splitlines()[0]
            raise StateError(f"the deployment's topology cannot be read ({why}): {topo_file} is pulsarlab's own "
                             "record; restore it, or stop the nodes and remove the folder") from None
        return cls(topo, state_dir, dist, say)

    # ----- observations: what a runtime must say about one node ----------------------------------
    @abc.abstractmethod
    def node_alive(self, name: str) -> bool: ...

    @abc.abstractmethod
    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        """(pid or None, alive, paused) of a node."""

    @abc.abstractmethod
    def down(self, keep_data: bool = False) -> list[str]: ...

    # ----- endpoints ---------------------------------------------------------------------------
    def alive(self, name: str) -> bool:
        return self.node_alive(name)

    def service_url(self, cluster: str) -> str:
        return self.topo.service_url(cluster)

    def endpoints(self) -> list[NodeEndpoint]:
        out = []
        for n in self.topo.nodes:
            addr = self.topo.address_of(n)
            url: str | None = None
            if n.role == Role.BROKER:
                url = self.topo.broker_web_url(n)
            elif n.role == Role.BOOKIE:
                url = f"http://{addr}:{n.port('http')}"
            out.append(NodeEndpoint(n.name, n.role.value, n.cluster, n.region, addr, url))
        return out

    def client_auth(self, role: str | None = None) -> ClientAuth | None:
        """A client's credentials on this deployment (``role`` default: the admin role); None if open."""
        return security_files.client_auth(self.topo, self.state_dir, role)

    def admin_url(self, cluster: str) -> str:
        """The web URL of a broker of ``cluster`` that answers, for admin calls."""
        auth = self.client_auth()
        for b in self.topo.nodes_of(Role.BROKER, cluster):
            url = self.topo.broker_web_url(b)
            if self.alive(b.name) and HttpOk(f"{url}/admin/v2/brokers/ready", auth=auth)()[0]:
                return url
        raise StateError(f"no broker of cluster {cluster} is up")

    def distribution(self) -> Distribution:
        """The distribution the nodes run from: given, or the one this deployment was started with."""
        if self.dist is None:
            self.dist = resolve_distribution(self.state.distribution or None)
        return self.dist

    def pulsar_version(self) -> str:
        return self.state.version

    # ----- readiness and status ----------------------------------------------------------------
    def readiness_probe(self, node: Node) -> HttpOk | ZkServing:
        addr = self.topo.address_of(node)
        if node.role == Role.ZOOKEEPER:
            return ZkServing(addr, node.port("client"))
        if node.role == Role.BOOKIE:
            return HttpOk(f"http://{addr}:{node.port('http')}/api/v1/bookie/is_ready", "bookie /api/v1/bookie/is_ready")
        return HttpOk(f"{self.topo.broker_web_url(node)}/admin/v2/brokers/ready", "broker /admin/v2/brokers/ready",
                      auth=self.client_auth())

    # ----- versions: what each node says it runs -----------------------------------------------
    def jvm_command_line(self, name: str) -> list[str] | None:
        """The arguments of the node's JVM, where this runtime can read them (None: it cannot)."""
        return None

    def reported_version(self, node: Node) -> versions.Reported:
        """The release the node reports (see :mod:`pulsarlab.runtime.versions`)."""
        if node.role == Role.BROKER:
            return versions.broker(self.topo.broker_web_url(node), self.client_auth())
        if node.role == Role.ZOOKEEPER:
            return versions.zookeeper(self.topo.address_of(node), node.port("client"))
        return versions.from_command_line(self.jvm_command_line(node.name))

    def reported_versions(self) -> dict[str, tuple[str | None, str]]:
        with ThreadPoolExecutor(max_workers=8) as pool:
            found = dict(zip((n.name for n in self.topo.nodes), pool.map(self.reported_version, self.topo.nodes),
                             strict=True))
        return {name: (r.version, r.source) for name, r in found.items()}

    def status(self) -> list[NodeStatus]:
        def one(n: Node) -> NodeStatus:
            pid, alive, paused = self.process_info(n.name)
            ready = alive and not paused and self.readiness_probe(n)()[0]
            reported = self.reported_version(n) if alive and not paused else versions.Reported(None, "")
            return NodeStatus(n.name, n.role.value, n.cluster, n.region, self.topo.address_of(n),
                              pid if alive else None, alive, paused, ready, reported.version, reported.source)

        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(one, self.topo.nodes))
