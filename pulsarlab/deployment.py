"""The contract of a running deployment: all that ``admin/``, ``workload/``, ``chaos/`` and ``ops``
may know of one, whatever runtime runs its nodes.

A deployment is a topology brought up under a state directory. It exposes endpoints (per cluster
the service and admin URLs; per node its role, cluster, region, address and HTTP URL) and node
control (running?, stop, start, kill, pause, resume, wipe one node's data, its log).
``pulsarlab.runtime`` provides the implementations (local processes, docker compose) and opens the
one a state directory records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pulsarlab.distribution import Distribution
    from pulsarlab.security import ClientAuth
    from pulsarlab.topology import Topology

Say = Callable[[str], None]


def quiet(_msg: str) -> None:
    """A ``Say`` that says nothing."""


@dataclass
class NodeStatus:
    """One node as ``status`` shows it."""

    name: str
    role: str
    cluster: str | None
    region: str
    address: str
    pid: int | None
    alive: bool
    paused: bool
    ready: bool


@dataclass
class UpResult:
    already_running: bool
    seconds: float
    started: list[str]
    drift: list = field(default_factory=list)  # differences from the topology an `up` found on a running cluster
    drift_fixed: bool = False


@dataclass(frozen=True)
class NodeEndpoint:
    """Where one node answers."""

    name: str
    role: str
    cluster: str | None
    region: str
    address: str
    http_url: str | None  # broker web / bookie HTTP; None for ZooKeeper


@runtime_checkable
class Deployment(Protocol):
    """A running (or stopped) deployment, as every command sees it."""

    runtime: str
    topo: Topology
    state_dir: Path
    say: Say

    # -- endpoints --------------------------------------------------------------------------
    def service_url(self, cluster: str) -> str: ...

    def admin_url(self, cluster: str) -> str:
        """The web URL of a broker of ``cluster`` that answers now (raises StateError if none)."""
        ...

    def endpoints(self) -> list[NodeEndpoint]: ...

    def client_auth(self, role: str | None = None) -> ClientAuth | None:
        """A client's token file and CA on a secure deployment (default role: the admin); None when open."""
        ...

    # -- node control -----------------------------------------------------------------------
    def alive(self, name: str) -> bool: ...

    def stop_node(self, name: str, kill: bool = False) -> None: ...

    def start_node(self, name: str) -> None: ...

    def start_group(self, names: list[str]) -> None:
        """Start the named nodes that are down, tier by tier (ZooKeeper, bookies, brokers), each tier at once."""
        ...

    def wipe_node_data(self, name: str) -> None:
        """Remove one stopped node's data, as if its disk were lost (refused while it runs)."""
        ...

    def pause_node(self, name: str) -> None: ...

    def resume_node(self, name: str) -> None: ...

    def log_file(self, name: str) -> Path | None: ...

    def traffic_cgroup(self, name: str) -> str | None:
        """The cgroup (v2 path) the node's sockets belong to, which packet filters match on (every
        node talks from the same loopback source address); None when it cannot be told."""
        ...

    def log_tail(self, name: str, lines: int = 25) -> str: ...

    # -- the whole deployment ---------------------------------------------------------------
    def status(self) -> list[NodeStatus]: ...

    def up(
        self, check: Callable[[Deployment], None] | None = None, seed: Callable[[Deployment], None] | None = None,
        before_brokers: Callable[[Deployment], None] | None = None,
        brokers_ready: Callable[[Deployment], None] | None = None,
    ) -> UpResult: ...

    def down(self, keep_data: bool = False) -> list[str]: ...

    def distribution(self) -> Distribution:
        """The Pulsar distribution on this machine (its client jars drive the workload)."""
        ...

    def pulsar_version(self) -> str: ...
