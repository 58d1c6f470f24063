"""The one fault scheduler: timed faults, and waits between them, counted from the first
acknowledged send, in a background thread.

Steps run in the order given; each waits for its ``at`` (seconds from the start; a time already
past, or none, runs it right after the step before). A fault runs its action (see
:mod:`pulsarlab.chaos.actions`); a wait runs the function it carries (a scenario's condition,
say) until it returns. Every fault, applied or healed, ok or not, becomes a row of the run's
history (:mod:`pulsarlab.history.faults`) the moment its action returns.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pulsarlab.chaos.actions import ACTIONS, PHASES, Fault, check
from pulsarlab.deployment import NodeControl, Say, quiet
from pulsarlab.history.faults import FaultJournal, FaultRow

RESUMED_S = 5.0
"""How long sends are acknowledged again after the last fault returned before a settling workload stops."""
SLACK_S = 30.0
"""What a step may take beyond its own timeout before :meth:`Scheduler.join` gives up on it."""
ERROR_CHARS = 4000
"""How much of a failed fault's error its history row keeps (a failed command's output tail too)."""


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
    for a schedule whose length is not known beforehand (a rolling upgrade). ``settle_s``: the
    workload goes on after its duration until, once the last step returned, its sends have been
    acknowledged again for a few seconds (at most ``settle_s``): a fault that takes long to land (a
    kill through Ansible on a loaded machine) still has the recovery from it observed."""

    def __init__(self, cluster: NodeControl, steps: Sequence[Step], history: Path | None = None, say: Say = quiet,
                 end_after_s: float | None = None, settle_s: float | None = None):
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
        self.settle_s = settle_s
        self.done_at: float | None = None  # time.monotonic() when the last step returned
        self.acked = 0  # the workload's acknowledged sends, as its last progress call said
        self._acked_at_done = 0
        self.finished: bool | None = None  # once finish()ed: whether every step had run
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)
        self._t0 = 0.0

    @property
    def started(self) -> bool:
        return self._t0 > 0

    @property
    def started_at(self) -> float:
        """time.monotonic() at the first acknowledged send (0 before)."""
        return self._t0

    def send_bound_s(self, duration: float) -> float:
        """The longest a workload of ``duration`` may send under this schedule: its duration, or
        with ``settle_s``, room for every step's timeout and the settling after them."""
        if self.end_after_s is not None or self.settle_s is None:
            return duration
        last = max((s.at or 0.0 for s in self.steps), default=0.0)
        return max(duration, last + sum(s.timeout + SLACK_S for s in self.steps) + self.settle_s)

    @contextlib.contextmanager
    def ending(self, end_sending: Callable[[str], None], duration: float) -> Iterator[None]:
        """While a workload of ``duration`` runs: with ``end_after_s``, its sending ends that long
        after the last step returned; with ``settle_s``, once ``duration`` has passed since the first
        acknowledged send and, after the last step returned, sends were acknowledged again for
        ``RESUMED_S`` (or ``settle_s`` passed), whichever is later."""
        if self.end_after_s is None and self.settle_s is None:
            yield
            return
        over = threading.Event()

        def due() -> str | None:
            """Why sending ends now, or None while it goes on."""
            if not self.started or self.done_at is None:
                return None
            since_done = time.monotonic() - self.done_at
            if self.end_after_s is not None:
                return f"the fault schedule finished {self.end_after_s:g}s before" if since_done >= self.end_after_s else None
            assert self.settle_s is not None
            if time.monotonic() - self._t0 < duration:
                return None
            # settled: sends acknowledged again for a few seconds since the faults returned, or the bound
            acked_again = self.acked > self._acked_at_done and since_done >= min(RESUMED_S, self.settle_s)
            if not acked_again and since_done < self.settle_s:
                return None
            late = time.monotonic() - (self._t0 + duration)
            if late >= 1.0:
                how = "acknowledged again" if acked_again else f"not acknowledged again within {self.settle_s:g}s"
                return f"{duration:g}s, and {late:.1f}s more for the faults to settle ({how})"
            return f"{duration:g}s produced"

        def watch() -> None:
            while not over.wait(0.2):
                if (why := due()) is not None:
                    end_sending(why)
                    return

        watcher = threading.Thread(target=watch, name="schedule-end", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            over.set()
            watcher.join(5)

    @property
    def errors(self) -> list[str]:
        """Each fault that failed, as one line."""
        return [f"{r.fault} at {r.offset_s:.1f}s: {r.error_line}" for r in self.faults if not r.ok]

    def start(self) -> Scheduler:
        if not self.started:
            self._t0 = time.monotonic()
            self._thread.start()
        return self

    def on_progress(self, counters: Progress) -> None:
        """A workload's progress callback: starts the schedule at the first acknowledged send, so
        the steps' times count from when the workload is producing."""
        self.acked = counters.acked
        if counters.acked > 0:
            self.start()

    def _run(self) -> None:
        try:
            self._steps()
        finally:
            self._acked_at_done = self.acked
            self.done_at = time.monotonic()
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
            text = str(exc) or type(exc).__name__
            if len(text) > ERROR_CHARS:  # the first line (what failed) and the end (why)
                head = text.splitlines()[0][:200]
                text = f"{head}\n...\n{text[-(ERROR_CHARS - len(head) - 5):]}"
            # the history keeps the whole cause (a failed command's output tail too); what is said, one line of it
            row = FaultRow(step, fault.action, fault.args, (), PHASES[fault.action], offset, began, time.time_ns(),
                           "error", error=text)
            self.say(f"fault at {offset:.1f}s failed: {fault}: {row.error_line}")
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
