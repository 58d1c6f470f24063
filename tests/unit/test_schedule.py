"""The fault timetable: faults count from the workload's first acknowledged send, bad faults are
named before anything runs, and a schedule that never started says so."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from pulsarlab.chaos.schedule import Fault, FaultSchedule, check
from pulsarlab.topology import load


@dataclass
class Recorder:
    """Node control that only records what it was asked (the schedule's logic, not Pulsar's)."""

    topo: object = field(default_factory=lambda: load("sync"))
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def stop_node(self, name: str, kill: bool = False) -> None:
        self.calls.append(("kill" if kill else "stop", (name,)))

    def start_group(self, names) -> None:
        self.calls.append(("start", tuple(names)))


@dataclass
class Counters:
    acked: int = 0


def test_faults_count_from_the_first_acknowledged_send() -> None:
    cluster = Recorder()
    schedule = FaultSchedule(cluster, [Fault(0.2, "kill", ("bk1-eu",)), Fault(0.3, "start", ("bk1-eu", "pulsar1-eu"))])
    schedule.on_progress(Counters(acked=0))
    time.sleep(0.4)  # deliberate: past both faults' offsets, to show that nothing runs before an ack
    assert cluster.calls == []  # nothing acknowledged yet: the clock has not started
    schedule.on_progress(Counters(acked=5))
    began = time.monotonic()
    log = schedule.join(5)
    assert time.monotonic() - began >= 0.25
    assert cluster.calls == [("kill", ("bk1-eu",)), ("start", ("bk1-eu", "pulsar1-eu"))]
    assert [r.done for r in log.done] == ["killed bk1-eu", "started bk1-eu, pulsar1-eu"] and not log.errors
    assert [round(r.at, 1) for r in log.done] == [0.2, 0.3] and all(r.wall_ns > 0 for r in log.done)


def test_a_schedule_that_never_started_is_an_error_not_a_silent_success() -> None:
    log = FaultSchedule(Recorder(), [Fault(1, "kill", ("bk1-eu",))]).join(1)
    assert log.done == [] and log.errors == ["the schedule never started: the workload acknowledged nothing"]


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault(1, "explode", ("bk1-eu",)), "unknown fault action 'explode'"),
        (Fault(1, "kill", ("bk9-mars",)), "fault kill bk9-mars:"),
        (Fault(1, "kill", ()), "needs at least one node"),
    ],
)
def test_bad_faults_are_named_before_anything_runs(fault: Fault, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check(Recorder(), fault)
    with pytest.raises(ValueError, match=message):
        FaultSchedule(Recorder(), [Fault(0, "kill", ("bk1-eu",)), fault])
