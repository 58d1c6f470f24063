"""Runtimes: where and how nodes run. Each implements :class:`pulsarlab.deployment.Endpoints`, and
those that act on nodes (local, docker, an attached Compose project)
:class:`pulsarlab.deployment.NodeControl` too; the state
directory records which one a deployment uses, and :func:`open_deployment` opens it."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pulsarlab.deployment import Endpoints, Say, quiet
from pulsarlab.errors import StateError, UsageError
from pulsarlab.runtime.state import ClusterState
from pulsarlab.topology import Topology

RUNTIMES: dict[str, str] = {
    "local": "pulsarlab.runtime.local:LocalCluster",
    "docker": "pulsarlab.runtime.docker.cluster:DockerCluster",
    "external": "pulsarlab.runtime.external:ExternalCluster",
    "compose": "pulsarlab.runtime.docker.attached:ComposeAttached",  # attached, with node control
    "ansible": "pulsarlab.runtime.hosts:AnsibleHosts",  # attached by its inventory, with node control
}
"""Runtime name -> ``module:class`` (imported only when used: docker needs python-on-whales)."""
ATTACHED: dict[str, str] = {
    "external": "pulsarlab attach --topology FILE",
    "compose": "docker compose up, then pulsarlab attach --compose-project NAME",
    "ansible": "playbooks/deploy.yml and configure.yml, or pulsarlab attach --inventory FILE",
}
"""The runtimes of nodes started by something else, and how such a deployment comes to be."""


def startable(name: str) -> None:
    """Refuse a runtime that does not start nodes itself (``up`` and fresh scenario clusters)."""
    runtime_class(name)
    if name in ATTACHED:
        raise UsageError(f"the {name} runtime acts on nodes started by something else ({ATTACHED[name]}); "
                         f"pulsarlab starts nodes on the {' or '.join(n for n in RUNTIMES if n not in ATTACHED)} runtime")


def runtime_class(name: str) -> type[Any]:  # a NodeRuntime subclass, looked up by name
    if name not in RUNTIMES:
        raise UsageError(f"unknown runtime {name!r}: choose one of {', '.join(RUNTIMES)}")
    module, cls = RUNTIMES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def new_deployment(topo: Topology, state_dir: Path, runtime: str = "local", say: Say = quiet, **kwargs) -> Endpoints:
    """A deployment of ``topo`` under ``state_dir`` on ``runtime`` (nothing starts yet)."""
    return runtime_class(runtime)(topo, state_dir, say=say, **kwargs)


def open_deployment(state_dir: Path, say: Say = quiet) -> Endpoints:
    """The deployment recorded in ``state_dir`` (as ``up`` left it), on the runtime it records."""
    state = ClusterState.load(state_dir)
    if state is None:
        raise StateError(f"no pulsarlab cluster in {state_dir}: run 'pulsarlab up' first")
    return runtime_class(state.runtime or "local").open(state_dir, say=say)
