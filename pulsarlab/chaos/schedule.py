"""Faults on a timetable: each one runs at its offset from the start of a workload.

A fault is an action name and its arguments (``kill bk1-eu``, ``region-loss eu``...). The actions
live in :data:`ACTIONS`; each takes the deployment and the fault's arguments, does the damage, and
returns one line saying what it did (which nodes, which rules), for the scenario's record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pulsarlab.deployment import Deployment

FaultAction = Callable[[Deployment, tuple[str, ...]], str]
"""``action(deployment, args) -> what was done``; raises on failure."""

Validator = Callable[[Deployment, tuple[str, ...]], None]
"""Checks a fault's arguments before anything runs; raises ``ValueError`` naming the problem."""


class Progress(Protocol):
    """What a workload's progress callback gets (its live counters), as far as faults care."""

    acked: int


@dataclass(frozen=True)
class Fault:
    """``action`` with ``args`` (node names or targets, regions...) at ``at`` seconds."""

    at: float
    action: str
    args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return " ".join((self.action, *self.args))


@dataclass(frozen=True)
class FaultRecord:
    """One fault as it happened: when (seconds from the schedule's start, and wall-clock ns),
    and what it did."""

    at: float
    wall_ns: int
    fault: Fault
    done: str


@dataclass
class FaultLog:
    """What ran, and any error."""

    done: list[FaultRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _each_node(op: Callable[[Deployment, str], None], past: str) -> FaultAction:
    def run(cluster: Deployment, args: tuple[str, ...]) -> str:
        for n in args:
            op(cluster, n)
        return f"{past} {', '.join(args)}"

    return run


def _start_nodes(cluster: Deployment, args: tuple[str, ...]) -> str:
    cluster.start_group(list(args))
    return f"started {', '.join(args)}"


def _known_nodes(cluster: Deployment, args: tuple[str, ...]) -> None:
    if not args:
        raise ValueError("needs at least one node")
    for n in args:
        cluster.topo.node(n)  # KeyError names an unknown node


ACTIONS: dict[str, FaultAction] = {
    "stop": _each_node(lambda c, n: c.stop_node(n), "stopped"),
    "kill": _each_node(lambda c, n: c.stop_node(n, kill=True), "killed"),
    "start": _start_nodes,
    "pause": _each_node(lambda c, n: c.pause_node(n), "paused"),
    "resume": _each_node(lambda c, n: c.resume_node(n), "resumed"),
}
"""Every fault action by name; chaos modules register more with :func:`register`."""

VALIDATORS: dict[str, Validator] = {name: _known_nodes for name in ACTIONS}


def register(name: str, action: FaultAction, validate: Validator | None = None) -> None:
    """Add a fault action (and the check of its arguments) under ``name``."""
    ACTIONS[name] = action
    if validate is not None:
        VALIDATORS[name] = validate


def check(cluster: Deployment, fault: Fault) -> None:
    """Raise ``ValueError`` if ``fault`` cannot run on ``cluster``: unknown action or bad arguments."""
    if fault.action not in ACTIONS:
        raise ValueError(f"unknown fault action {fault.action!r}: one of {', '.join(sorted(ACTIONS))}")
    validate = VALIDATORS.get(fault.action)
    if validate is not None:
        try:
            validate(cluster, fault.args)
        except KeyError as exc:
            raise ValueError(f"fault {fault}: {exc.args[0] if exc.args else exc}") from None
        except ValueError as exc:
            raise ValueError(f"fault {fault}: {exc}") from None


def run_fault(cluster: Deployment, fault: Fault) -> str:
    """Run one fault now; returns what it did."""
    check(cluster, fault)
    return ACTIONS[fault.action](cluster, fault.args)


class FaultSchedule:
    """Runs faults in a background thread; ``start()`` at the workload's start, ``join()`` after."""

    def __init__(self, cluster: Deployment, faults: list[Fault]):
        for f in faults:
            check(cluster, f)  # every problem named before anything runs
        self.cluster = cluster
        self.faults = sorted(faults, key=lambda f: f.at)
        self.log = FaultLog()
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._t0 = 0.0

    def start(self) -> FaultSchedule:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def on_progress(self, counters: Progress) -> None:
        """A workload's progress callback: starts the schedule at the first acknowledged send, so
        the faults' times count from when the workload is producing."""
        if not self._t0 and counters.acked > 0:
            self.start()

    def _run(self) -> None:
        for f in self.faults:
            delay = self._t0 + f.at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            at, wall = time.monotonic() - self._t0, time.time_ns()
            try:
                done = ACTIONS[f.action](self.cluster, f.args)
                self.log.done.append(FaultRecord(at, wall, f, done))
            except Exception as exc:  # reported with the scenario's result
                self.log.errors.append(f"{f} at {f.at}s: {exc}")

    def join(self, timeout: float = 600) -> FaultLog:
        if not self._t0:
            if not self.log.errors:
                self.log.errors.append("the schedule never started: the workload acknowledged nothing")
            return self.log
        self._thread.join(timeout)
        return self.log
