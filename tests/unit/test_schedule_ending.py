"""When a scheduled workload stops sending: a scenario with faults produces for its duration and
then goes on until, after its faults returned, its sends were acknowledged again for a few seconds
(at most its settle bound), so a fault that takes long to land still has its recovery seen; with
``end_after_schedule_s``, sending ends that long after the last step, before the duration."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from pulsarlab.chaos.schedule import RESUMED_S, SLACK_S, Scheduler, Wait
from pulsarlab.scenarios.model import parse_scenario


def slow_step(at: float, takes: float) -> Wait:
    return Wait(at=at, timeout=30, run=lambda _started, _stop: time.sleep(takes))


def ended_after(schedule: Scheduler, duration: float, acks: bool = False, limit: float = 20) -> tuple[float, str]:
    """Seconds from the schedule's start until the workload is told to end sending, and why;
    ``acks``: the workload's sends are acknowledged all along (progress every 0.1 s)."""
    told: list[str] = []
    ended = threading.Event()

    def end_sending(why: str) -> None:
        told.append(why)
        ended.set()

    def acknowledging() -> None:
        acked = 0
        while not ended.wait(0.1):
            acked += 10
            schedule.on_progress(SimpleNamespace(acked=acked))

    with schedule.ending(end_sending, duration):
        schedule.start()
        if acks:
            threading.Thread(target=acknowledging, daemon=True).start()
        assert ended.wait(limit), "sending was never ended"
    return time.monotonic() - schedule.started_at, told[0]


def test_a_fault_that_returns_late_keeps_the_workload_sending_until_acknowledged_again() -> None:
    schedule = Scheduler(SimpleNamespace(), [slow_step(0.2, 1.5)], settle_s=30)  # type: ignore[arg-type]
    took, why = ended_after(schedule, duration=0.5, acks=True)
    assert 0.2 + 1.5 + RESUMED_S <= took < 0.2 + 1.5 + RESUMED_S + 2, took  # past the 0.5 s duration
    assert why.startswith("0.5s, and ") and why.endswith("more for the faults to settle (acknowledged again)"), why


def test_no_ack_after_a_late_fault_keeps_it_sending_until_the_settle_bound() -> None:
    schedule = Scheduler(SimpleNamespace(), [slow_step(0.2, 1.0)], settle_s=2.0)  # type: ignore[arg-type]
    took, why = ended_after(schedule, duration=0.5)
    assert 3.2 <= took < 4.5, took
    assert why.endswith("(not acknowledged again within 2s)"), why


def test_faults_that_settle_in_time_end_sending_at_the_duration() -> None:
    schedule = Scheduler(SimpleNamespace(), [slow_step(0.1, 0.1)], settle_s=0.3)  # type: ignore[arg-type]
    took, why = ended_after(schedule, duration=1.5, acks=True)
    assert 1.5 <= took < 2.5, took
    assert why == "1.5s produced"


def test_end_after_schedule_ends_before_the_duration() -> None:
    schedule = Scheduler(SimpleNamespace(), [slow_step(0.1, 0.5)], end_after_s=0.3)  # type: ignore[arg-type]
    took, why = ended_after(schedule, duration=600)
    assert 0.9 <= took < 2.5, took
    assert why == "the fault schedule finished 0.3s before"


def test_the_drivers_deadline_leaves_room_for_every_step_and_the_settling() -> None:
    steps = [slow_step(5, 0), slow_step(20, 0)]
    assert Scheduler(SimpleNamespace(), steps, settle_s=15).send_bound_s(25) == 20 + 2 * (30 + SLACK_S) + 15  # type: ignore[arg-type]
    assert Scheduler(SimpleNamespace(), steps, end_after_s=5).send_bound_s(900) == 900  # type: ignore[arg-type]
    assert Scheduler(SimpleNamespace(), steps).send_bound_s(25) == 25  # type: ignore[arg-type]


def test_a_scenario_with_faults_settles_for_its_recovery_bound_and_a_margin() -> None:
    base = {"name": "s", "topology": {"ref": "smoke"}, "workload": {"rate": 10, "duration": 25}}
    kill = [{"at": 6, "fault": "kill bk1"}]
    assert parse_scenario({**base, "schedule": kill, "expect": {"rto_max_s": 30}}).settle_s() == 35
    assert parse_scenario({**base, "schedule": kill}).settle_s() == 15
    assert parse_scenario(base).settle_s() is None
    rolling = {**base, "schedule": [{"at": 5, "fault": "upgrade 4.0.8"}], "end_after_schedule_s": 5}
    assert parse_scenario(rolling).settle_s() is None
