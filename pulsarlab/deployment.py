"""The contract of a running deployment: all that ``admin/``, ``workload/``, ``chaos/`` and ``ops``
may know of one, whatever runtime runs its nodes.

A deployment is a topology under a state directory, split by purpose:

- :class:`Endpoints`, what every deployment has: per cluster the service and admin URLs, per node
  its role, cluster, region, address and HTTP URL, client credentials, whether each node runs;
- :class:`NodeControl`, what a runtime that acts on nodes adds: running?, stop, start, kill,
  pause, resume, wipe one node's data, its log and cgroup, and ``up``.

A cluster pulsarlab only attached to is :class:`Endpoints` and nothing more, so passing it where
node control is needed is a type error. ``pulsarlab.runtime`` provides the implementations (local
processes, docker compose, an attached cluster) and opens the one a state directory records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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
    version: str | None = None  # the Pulsar release the node reports running (None: no answer)
    version_from: str = ""  # where that figure comes from (pulsarlab.runtime.versions)


@dataclass
class UpResult:
    already_running: bool
    seconds: float
    started: list[str]
    drift: list[Any] = field(default_factory=list)  # differences from the topology an `up` found on a running cluster
    drift_fixed: bool = False
    settings: Any = None  # a running cluster's settings changed: the plan or its rollout (upgrade.rollout)


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
class Endpoints(Protocol):
    """What every deployment has, whoever started its nodes: where it answers, its credentials,
    what its nodes look like now, and how to let go of it."""

    # read-only here: an implementation may hold something narrower (a Reporter is a Say)
    @property
    def runtime(self) -> str: ...

    @property
    def topo(self) -> Topology: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def say(self) -> Say: ...

    def service_url(self, cluster: str) -> str: ...

    def admin_url(self, cluster: str) -> str:
        """The web URL of a broker of ``cluster`` that answers now (raises StateError if none)."""
        ...

    def endpoints(self) -> list[NodeEndpoint]: ...

    def client_auth(self, role: str | None = None) -> ClientAuth | None:
        """A client's token file and CA on a secure deployment (default role: the admin); None when open."""
        ...

    def alive(self, name: str) -> bool:
        """Whether the node runs now (for an attached cluster: whether its main port answers)."""
        ...

    def status(self) -> list[NodeStatus]: ...

    def down(self, keep_data: bool = False) -> list[str]:
        """Stop what this deployment runs (nothing, for a deployment it only attached to) and
        forget it; returns the nodes stopped."""
        ...

    def distribution(self) -> Distribution:
        """The Pulsar distribution on this machine (its client jars drive the workload)."""
        ...

    def pulsar_version(self) -> str: ...

    def reported_versions(self) -> dict[str, tuple[str | None, str]]:
        """Per node, the Pulsar release it reports running (None: no answer) and where that comes from."""
        ...


@runtime_checkable
class NodeControl(Endpoints, Protocol):
    """A deployment whose runtime acts on its nodes: starts, stops, pauses and wipes them, knows
    their processes (logs, cgroups) and brings the whole topology up."""

    def stop_node(self, name: str, kill: bool = False) -> int:
        """Stop (``kill``: SIGKILL) the node; the wall-clock ns when it stopped, by the clock of the
        machine it runs on where the runtime can tell (else when the stop returned here)."""
        ...

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

    def log_tail(self, name: str, lines: int = 25) -> str: ...

    def traffic_cgroup(self, name: str) -> str | None:
        """The cgroup (v2 path) the node's sockets belong to, which packet filters match on (every
        node talks from the same loopback source address); None when it cannot be told."""
        ...

    def cut_problem(self) -> str | None:
        """Why this machine's packet filter cannot cut this deployment's traffic (its nodes run
        elsewhere); None when network faults can act on it."""
        ...

    def preflight(self, network: bool = False) -> None:
        """Before faults run: raise :class:`~pulsarlab.errors.StateError` naming what keeps them
        from acting on the nodes (an unreachable host, a missing right; with ``network``, what
        keeps packet filter rules from being changed)."""
        ...

    def up(
        self, check: Callable[[NodeControl], None] | None = None,
        before_brokers: Callable[[NodeControl], None] | None = None,
        brokers_ready: Callable[[NodeControl], None] | None = None,
    ) -> UpResult: ...


@runtime_checkable
class HostFilters(Protocol):
    """A deployment whose nodes run on hosts of their own, each behind its own packet filter:
    network faults add their rules on the hosts (one rule list per node's host) and heal removes
    them there, by their comment's tag."""

    def add_host_rules(self, rules: dict[str, list[str]]) -> tuple[int, int | None]:
        """Add each host's rules (``CHAIN match... -j DROP``, the token ``@controller`` standing for
        the address this machine reaches that host from); (rules added, when the last host had them,
        in ns of its own clock)."""
        ...

    def remove_host_rules(self, tag: str, label: str | None = None) -> tuple[int, int]:
        """Remove every rule of ``tag`` (only ``label``'s if given) on every host: (rules removed,
        packets they had dropped)."""
        ...


@runtime_checkable
class Upgradable(NodeControl, Protocol):
    """A deployment whose runtime can move one node to another Pulsar release (``pulsarlab upgrade``)."""

    def stage_release(self, dist: Distribution) -> None:
        """Make ``dist`` ready to start nodes from, before any node stops (the docker runtime builds
        its image); one clear error when it cannot."""
        ...

    def place_node(self, name: str, dist: Distribution) -> None:
        """Have the stopped node start from ``dist`` from now on (its files written anew over that
        distribution's own ``conf/``)."""
        ...

    def record_version(self, version: str, dist: Distribution | None, done: bool) -> None:
        """Record an upgrade to ``version``: under way (``done`` False) or complete (every node on it;
        ``dist`` then becomes the deployment's distribution)."""
        ...
