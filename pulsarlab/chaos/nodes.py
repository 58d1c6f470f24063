"""Node actions on targets: ``kill|stop|start|pause|resume`` take node names or targets
(``owner:TOPIC``, ``ensemble:TOPIC``, ``region:R``; see :mod:`pulsarlab.chaos.targets`), resolved
when the fault runs. Several nodes are hit at once, not one after the other."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pulsarlab.chaos import targets
from pulsarlab.chaos.actions import Done, register
from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.topology import Role

T = TypeVar("T")


def at_once(names: list[str], op: Callable[[str], T]) -> list[T]:
    """``op`` on every node in parallel, its results in order; the first error is raised once all are done."""
    if len(names) == 1:
        return [op(names[0])]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = [pool.submit(op, n) for n in names]
    return [f.result() for f in futures]


def stopped_at(cluster: NodeControl, names: list[str], kill: bool) -> int:
    """Stop (or kill) the nodes at once; when the last of them stopped (see ``NodeControl.stop_node``)."""
    return max(at_once(names, lambda n: cluster.stop_node(n, kill=kill)))


def _stopper(kill: bool):
    def run(cluster: NodeControl, args: tuple[str, ...]) -> Done:
        names = targets.resolve_all(cluster, args)
        at = stopped_at(cluster, names, kill)
        return Done(f"{'killed' if kill else 'stopped'} {targets.describe(args, names)}", tuple(names), at)

    return run


def _pauser(paused: bool):
    def run(cluster: NodeControl, args: tuple[str, ...]) -> Done:
        names = targets.resolve_all(cluster, args)
        at_once(names, cluster.pause_node if paused else cluster.resume_node)
        return Done(f"{'paused' if paused else 'resumed'} {targets.describe(args, names)}", tuple(names))

    return run


def start(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Start the nodes (tier by tier: ZooKeeper, bookies, brokers) and wait until they are ready."""
    names = targets.resolve_all(cluster, args)
    cluster.start_group(names)
    return Done(f"started {targets.describe(args, names)}", tuple(names))


def any_targets(role: Role | None = None):
    """A validator: every argument is a valid target (of ``role`` nodes, if given)."""

    def validate(cluster: Endpoints, args: tuple[str, ...]) -> None:
        targets.check_all(cluster.topo, args, role)

    return validate


def no_args(_cluster: Endpoints, args: tuple[str, ...]) -> None:
    """A validator: the action takes no arguments."""
    if args:
        raise ValueError(f"takes no arguments (got {' '.join(args)})")


for _name, _action in {"kill": _stopper(True), "stop": _stopper(False), "pause": _pauser(True)}.items():
    register(_name, _action, any_targets())
register("start", start, any_targets(), heals=True)
register("resume", _pauser(False), any_targets(), heals=True)
