"""The rolling upgrade as a fault of a schedule: ``upgrade VERSION`` (an older VERSION is a rollback).

A scenario or ``workload run --fault`` runs it like any other fault, so it lands in the run's
history beside the messages; its row lists the nodes it moved and each one's window away (stop to
ready), from which the scenario measures the publish stall per node. Importing this module
registers the action.
"""

from __future__ import annotations

from pulsarlab import distribution
from pulsarlab.chaos.actions import Done, register
from pulsarlab.deployment import Endpoints, NodeControl, Upgradable
from pulsarlab.errors import PulsarlabError
from pulsarlab.history.faults import NodeWindow
from pulsarlab.progress import reporter_of
from pulsarlab.topology.model import PULSAR_VERSION
from pulsarlab.upgrade.run import upgrade

ACTION = "upgrade"


def _release(args: tuple[str, ...]) -> str:
    if len(args) != 1 or not PULSAR_VERSION.fullmatch(args[0]):
        raise ValueError("takes one Pulsar release, such as 'upgrade 4.0.8' (an older one rolls back)")
    return args[0]


def validate(cluster: Endpoints, args: tuple[str, ...]) -> None:
    """The release is named well; on a running deployment (before the schedule starts) the runtime
    can move nodes and the release is resolved now (downloaded if it is not cached, and the docker
    runtime's image built), not mid-run."""
    version = _release(args)
    if not isinstance(cluster, Upgradable):
        raise ValueError(f"the {cluster.runtime} runtime cannot move a node to another release from here")
    try:
        dist = distribution.resolve(version=version)
    except PulsarlabError as exc:
        raise ValueError(f"{version}: no such release can be resolved ({str(exc).splitlines()[0]})") from None
    try:
        cluster.stage_release(dist)  # the docker runtime's image, built now rather than mid-run
    except PulsarlabError as exc:
        raise ValueError(f"{version}: {str(exc).splitlines()[0]}") from None


FELL_SAID = "stopped by themselves before their turn (a restart outlasted their sessions), started on it together"


def run(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    assert isinstance(cluster, Upgradable)  # validate() said so before the schedule started
    dist = distribution.resolve(version=_release(args))
    result = upgrade(cluster, dist, reporter_of(cluster.say))
    moved = [m for m in result.nodes if m.action == "moved"]
    kept = len(result.nodes) - len(moved)
    fell = [m.node for m in moved if m.fell]
    what = (f"upgraded {len(moved)} node(s) to {result.target} one at a time in {result.seconds:.1f}s"
            + (f" ({kept} already on it)" if kept else "")
            + (f"; {FELL_SAID}: {', '.join(fell)}" if fell else ""))
    windows = tuple(NodeWindow(m.node, *m.away) for m in moved if m.away is not None)
    return Done(what, tuple(m.node for m in moved), parts=windows)


register(ACTION, run, validate)
