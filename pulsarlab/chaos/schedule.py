"""Faults on a timetable: each one runs at its offset from the start of a workload."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pulsarlab.deployment import Deployment


@dataclass(frozen=True)
class Fault:
    """``action`` (stop, start, kill, pause, resume) on ``nodes`` at ``at`` seconds."""

    at: float
    action: str
    nodes: tuple[str, ...]


@dataclass
class FaultLog:
    """When each fault really ran (monotonic seconds from the schedule's start), and any error."""

    done: list[tuple[float, Fault]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


ACTIONS: dict[str, Callable[[Deployment, str], None]] = {
    "stop": lambda c, n: c.stop_node(n),
    "kill": lambda c, n: c.stop_node(n, kill=True),
    "start": lambda c, n: c.start_node(n),
    "pause": lambda c, n: c.pause_node(n),
    "resume": lambda c, n: c.resume_node(n),
}


class FaultSchedule:
    """Runs faults in a background thread; ``start()`` at the workload's start, ``join()`` after."""

    def __init__(self, cluster: Deployment, faults: list[Fault]):
        for f in faults:
            if f.action not in ACTIONS:
                raise ValueError(f"unknown fault action {f.action!r}: one of {', '.join(ACTIONS)}")
            for n in f.nodes:
                cluster.topo.node(n)  # KeyError names an unknown node before anything runs
        self.cluster = cluster
        self.faults = sorted(faults, key=lambda f: f.at)
        self.log = FaultLog()
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._t0 = 0.0

    def start(self) -> FaultSchedule:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        for f in self.faults:
            delay = self._t0 + f.at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                for n in f.nodes:
                    ACTIONS[f.action](self.cluster, n)
                self.log.done.append((time.monotonic() - self._t0, f))
            except Exception as exc:  # reported with the scenario's result
                self.log.errors.append(f"{f.action} {','.join(f.nodes)} at {f.at}s: {exc}")

    def join(self, timeout: float = 600) -> FaultLog:
        self._thread.join(timeout)
        return self.log
