"""The one fault scheduler: timed faults, and waits between them, counted from the first
acknowledged send, in a background thread.

Steps run in the order given; each waits for its ``at`` (seconds from the start; a time already
past, or none, runs it right after the step before). A fault runs its action (see
:mod:`pulsarlab.chaos.actions`); a wait runs the function it carries (a scenario's condition,
say) until it returns. Every fault, applied or healed, ok or not, becomes a row of the run's
history (:mod:`pulsarlab.history.faults`) the moment its action returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pulsarlab.chaos.actions import ACTIONS, PHASES, Fault, check
from pulsarlab.deployment import NodeControl, Say, quiet
from pulsarlab.history.faults import FaultJournal, FaultRow

SLACK_S = 30.0
"""What a step may take beyond its own timeout before :meth:`Scheduler.join` gives up on it."""


class Progress(Protocol):
    """What a workload's progress callback gets (its live counters), as far as faults care."""

    acked: int


@dataclass(frozen=True)
class Wait:
    """A step that waits: ``run(started_s, stop)`` returns a record of how the wait went (kept in
    :attr:`Scheduler.waits`) and should return early once ``stop`` is set."""

    at: float | None
    timeout: float
    run: Callable[[float, threading.Event], Any]


Step = Fault | Wait


class Scheduler:
    """Runs ``steps`` against ``cluster``; every fault is checked before anything runs, and
    recorded in ``history`` (a run directory) when given. ``end_after_s``: the workload it drives
    stops producing this long after the last step returned (its duration stays the upper bound),
    for a schedule whose length is not known beforehand (a rolling upgrade)."""

    def __init__(self, cluster: NodeControl, steps: Sequence[Step], history: Path | None = None, say: Say = quiet,
                 end_after_s: float | None = None):
        for s in steps:
            if isinstance(s, Fault):
                check(cluster, s)  # every problem named before anything runs
        self.cluster, self.steps, self.say = cluster, list(steps), say
        self.journal = FaultJournal(history) if history is not None else None
        self.faults: list[FaultRow] = []
        self.waits: list[Any] = []
        self.stop = threading.Event()
        self.done = threading.Event()  # set when the last step returned (or the schedule was stopped)
        self.end_after_s = end_after_s
        self.finished: bool | None = None  # once finish()ed: whether every step had run
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._t0 = 0.0

    @property
    def started(self) -> bool:
        return self._t0 > 0

    @property
    def errors(self) -> list[str]:
        """Each fault that failed, as one line."""
        return [f"{r.fault} at {r.offset_s:.1f}s: {r.error}" for r in self.faults if not r.ok]

    def start(self) -> Scheduler:
        if not self.started:
            self._t0 = time.monotonic()
            self._thread.start()
        return self

    def on_progress(self, counters: Progress) -> None:
        """A workload's progress callback: starts the schedule at the first acknowledged send, so
        the steps' times count from when the workload is producing."""
        if counters.acked > 0:
            self.start()

    def _run(self) -> None:
        try:
            self._steps()
        finally:
            self.done.set()

    def _steps(self) -> None:
        for i, s in enumerate(self.steps):
            if s.at is not None and self.stop.wait(max(0.0, self._t0 + s.at - time.monotonic())):
                return
            if self.stop.is_set():
                return
            now = time.monotonic() - self._t0
            if isinstance(s, Wait):
                self.waits.append(s.run(now, self.stop))
            else:
                self._fault(i, s, now)

    def _fault(self, step: int, fault: Fault, offset: float) -> None:
        began = time.time_ns()
        try:
            done = ACTIONS[fault.action](self.cluster, fault.args)
        except Exception as exc:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            row = FaultRow(step, fault.action, fault.args, (), PHASES[fault.action], offset, began, time.time_ns(),
                           "error", error=text)
            self.say(f"fault at {offset:.1f}s failed: {fault}: {text}")
        else:
            row = FaultRow(step, fault.action, fault.args, done.nodes, PHASES[fault.action], offset, began,
                           time.time_ns(), "ok", done=done.what, effect_ts=done.at_ns, parts=done.parts)
            self.say(f"fault at {offset:.1f}s: {done.what}")
        self.faults.append(row)
        if self.journal is not None:
            self.journal.append(row)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the remaining steps (by default as long as their times and timeouts allow);
        False if they did not finish in time. A schedule that never started is finished."""
        if not self.started:
            return True
        if timeout is None:
            last = max((s.at or 0.0 for s in self.steps), default=0.0)
            timeout = max(0.0, self._t0 + last - time.monotonic()) + sum(s.timeout + SLACK_S for s in self.steps)
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def finish(self) -> bool:
        """Wait for the remaining steps as :meth:`join` does, then stop the schedule; whether every
        step had run (idempotent: a second call returns the first one's answer)."""
        if self.finished is None:
            self.finished = self.join()
            self.stop.set()
        return self.finished
