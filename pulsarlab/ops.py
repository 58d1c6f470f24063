"""What each command does, as plain functions the CLI and the tests call."""

from __future__ import annotations

import signal
from dataclasses import asdict
from pathlib import Path

from pulsarlab import render as rendering
from pulsarlab.errors import StateError
from pulsarlab.runtime import distribution
from pulsarlab.runtime.local import LocalCluster, Say, UpResult, timeout
from pulsarlab.runtime.roundtrip import roundtrip
from pulsarlab.runtime.state import ClusterState
from pulsarlab.topology import load

STATE_ROOT = Path(".pulsarlab")
RUNTIMES = ("local",)


def _quiet(_msg: str) -> None:
    pass


def _check_runtime(runtime: str) -> None:
    if runtime not in RUNTIMES:
        raise StateError(f"unknown runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}")


def find_state_dir(state_dir: Path | None) -> Path:
    """The state directory to act on: given, or the only cluster under ``.pulsarlab/``."""
    if state_dir is not None:
        return state_dir
    found = sorted(p.parent for p in STATE_ROOT.glob("*/state.json"))
    if not found:
        raise StateError("no pulsarlab cluster here (.pulsarlab/ is empty): run 'pulsarlab up' first")
    if len(found) > 1:
        raise StateError(f"several clusters here ({', '.join(p.name for p in found)}): pass --state-dir")
    return found[0]


def render_topology(topology: str, out_dir: Path, runtime: str = "local", dist: str | None = None) -> list[Path]:
    _check_runtime(runtime)
    topo = load(topology)
    base = distribution.resolve(dist).conf if dist else None
    return rendering.render(topo, out_dir, base)


def e2e_check(cluster: LocalCluster) -> None:
    """Every cluster passes a real produce-and-consume."""
    for c in cluster.topo.clusters:
        secs = roundtrip(c.name, cluster.topo.service_url(c.name), timeout("e2e"))
        cluster.say(f"cluster {c.name}: message produced and consumed ({secs:.1f}s)")


def up(
    topology: str, runtime: str = "local", state_dir: Path | None = None, dist: str | None = None, say: Say = _quiet
) -> tuple[UpResult, LocalCluster]:
    _check_runtime(runtime)
    topo = load(topology)
    state_dir = state_dir or STATE_ROOT / topo.name
    cluster = LocalCluster(topo, state_dir, None, say)
    if all(cluster.alive(n.name) for n in topo.nodes) and ClusterState.load(cluster.state_dir):
        return cluster.up(), cluster  # reports "already running" without touching anything
    cluster.dist = distribution.resolve(dist)
    say(f"Pulsar {cluster.dist.version} from {cluster.dist.home} (Java {cluster.dist.java.major})")
    return cluster.up(check=e2e_check), cluster


def open_cluster(state_dir: Path | None, say: Say = _quiet, need_dist: bool = False) -> LocalCluster:
    cluster = LocalCluster.open(find_state_dir(state_dir), say=say)
    if need_dist:
        cluster.dist = distribution.resolve(cluster.state.distribution or None)
    return cluster


def status(state_dir: Path | None) -> dict:
    cluster = open_cluster(state_dir)
    topo = cluster.topo
    return {
        "name": topo.name,
        "runtime": cluster.runtime,
        "state_dir": str(cluster.state_dir),
        "pulsar_version": cluster.state.version,
        "nodes": [asdict(n) for n in cluster.status()],
        "clusters": [
            {"name": c.name, "service_url": topo.service_url(c.name), "web_url": topo.web_url(c.name)}
            for c in topo.clusters
        ],
    }


def down(state_dir: Path | None, keep_data: bool = False, say: Say = _quiet) -> list[str]:
    return open_cluster(state_dir, say).down(keep_data)


def node_action(state_dir: Path | None, name: str, action: str, say: Say = _quiet) -> None:
    cluster = open_cluster(state_dir, say, need_dist=action == "start")
    try:
        cluster.topo.node(name)
    except KeyError:
        raise StateError(
            f"no node {name!r} in cluster {cluster.topo.name!r} (nodes: {', '.join(n.name for n in cluster.topo.nodes)})"
        ) from None
    if action in ("stop", "kill"):
        cluster.stop_node(name, kill=action == "kill")
    elif action == "start":
        cluster.start_node(name)
    elif action == "pause":
        cluster.signal_node(name, signal.SIGSTOP)
        say(f"{name} paused")
    elif action == "resume":
        cluster.signal_node(name, signal.SIGCONT)
        say(f"{name} resumed")
    else:
        raise StateError(f"unknown node action {action!r}")
