"""The one fault scheduler: faults count from the workload's first acknowledged send, steps run in
order at their offsets (waits between them), bad faults are named before anything runs, and every
fault becomes a row of the run's history."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pulsarlab.chaos import actions
from pulsarlab.chaos.actions import Done, Fault, check
from pulsarlab.chaos.schedule import ERROR_CHARS, Scheduler
from pulsarlab.errors import ProcessFailedError
from pulsarlab.history import part_files, write_table
from pulsarlab.history.faults import FAULTS_FILE, read_faults
from pulsarlab.scenarios.model import parse_scenario
from pulsarlab.scenarios.runner import schedule_steps
from pulsarlab.topology import load


@dataclass
class Recorder:
    """Node control that only records what it was asked (the schedule's logic, not Pulsar's)."""

    topo: object = field(default_factory=lambda: load("sync"))
    calls: list[tuple[str, tuple[str, ...], float]] = field(default_factory=list)
    down: set[str] = field(default_factory=set)

    def stop_node(self, name: str, kill: bool = False) -> int:
        self.calls.append(("kill" if kill else "stop", (name,), time.monotonic()))
        self.down.add(name)
        return time.time_ns()

    def start_group(self, names) -> None:
        self.calls.append(("start", tuple(names), time.monotonic()))
        self.down.difference_update(names)

    def alive(self, name: str) -> bool:
        return name not in self.down


@dataclass
class Counters:
    acked: int = 0


def test_faults_count_from_the_first_acknowledged_send_and_are_rows_of_the_history(tmp_path: Path) -> None:
    cluster = Recorder()
    schedule = Scheduler(cluster, [Fault(0.2, "kill", ("bk1-eu",)), Fault(0.3, "start", ("bk1-eu", "pulsar1-eu"))],
                         history=tmp_path)  # type: ignore[arg-type]
    schedule.on_progress(Counters(acked=0))
    time.sleep(0.4)  # deliberate: past both faults' offsets, to show that nothing runs before an ack
    assert cluster.calls == []  # nothing acknowledged yet: the clock has not started
    began = time.monotonic()
    schedule.on_progress(Counters(acked=5))
    assert schedule.finish() and schedule.stop.is_set()
    assert [(c, n) for c, n, _ in cluster.calls] == [("kill", ("bk1-eu",)), ("start", ("bk1-eu", "pulsar1-eu"))]
    assert cluster.calls[0][2] - began >= 0.19

    rows = read_faults(tmp_path)
    assert rows == schedule.faults
    assert [(r.fault, r.phase, r.nodes, r.outcome, r.done) for r in rows] == [
        ("kill bk1-eu", "applied", ("bk1-eu",), "ok", "killed bk1-eu"),
        ("start bk1-eu pulsar1-eu", "healed", ("bk1-eu", "pulsar1-eu"), "ok", "started bk1-eu, pulsar1-eu")]
    for r, at in zip(rows, (0.2, 0.3), strict=True):  # never early; late only by scheduling delay
        assert at - 0.01 <= r.offset_s < at + 0.3, (at, r.offset_s)
    assert all(0 < r.ts <= r.ended_ts for r in rows) and rows[0].ended_ts <= rows[1].ts


def test_the_faults_part_is_not_an_event_part(tmp_path: Path) -> None:
    """The verifier reads event parts with the event schema: the faults part, with its own, stays out."""
    write_table(tmp_path, "producer-0", [{"op": "send", "type": "invoke", "producer": "p", "seq": 0, "ts": 1}])
    Scheduler(Recorder(), [Fault(0, "kill", ("bk1-eu",))], history=tmp_path).start().finish()  # type: ignore[arg-type]
    assert (tmp_path / FAULTS_FILE).is_file()
    assert [p.name for p in part_files(tmp_path)] == ["producer-0.parquet"]


def test_a_schedule_that_never_started_ran_nothing_and_wrote_nothing(tmp_path: Path) -> None:
    schedule = Scheduler(Recorder(), [Fault(1, "kill", ("bk1-eu",))], history=tmp_path)  # type: ignore[arg-type]
    assert schedule.finish() and not schedule.started
    assert schedule.faults == [] and read_faults(tmp_path) is None


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault(1, "explode", ("bk1-eu",)), "unknown fault action 'explode'"),
        (Fault(1, "kill", ("bk9-mars",)), "fault kill bk9-mars:"),
        (Fault(1, "region-loss", ("mars",)), "fault region-loss mars:"),
    ],
)
def test_bad_faults_are_named_before_anything_runs(fault: Fault, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check(Recorder(), fault)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        Scheduler(Recorder(), [Fault(0, "kill", ("bk1-eu",)), fault])  # type: ignore[arg-type]


def test_scenario_steps_run_in_order_at_their_offsets_with_waits_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scenario's schedule on the one scheduler: faults at their offsets, waits in between, a fault
    that fails recorded as an error row, a wait that times out recorded as not held."""

    def boom(c, args):
        raise RuntimeError("the node refused")

    monkeypatch.setitem(actions.ACTIONS, "boom", boom)
    monkeypatch.setitem(actions.VALIDATORS, "boom", lambda c, a: None)
    monkeypatch.setitem(actions.PHASES, "boom", actions.APPLIED)
    sc = parse_scenario({
        "name": "mine", "topology": "sync", "workload": {"namespace": "mytenant/eu", "rate": 100, "duration": 20},
        "schedule": [{"at": 0.2, "fault": "kill bk1-eu"}, {"wait": "node_dead bk1-eu", "timeout": 5},
                     {"at": 0.6, "fault": "start bk1-eu"}, {"wait": "node_alive bk1-eu", "timeout": 5},
                     {"at": 0.7, "fault": "boom bk2-eu"}, {"wait": "node_dead bk2-us", "timeout": 0.3}]})
    cluster = Recorder()
    steps = schedule_steps(cluster, sc.schedule, "persistent://mytenant/eu/t", say=lambda _m: None)  # type: ignore[arg-type]
    schedule = Scheduler(cluster, steps, history=tmp_path)  # type: ignore[arg-type]
    t0 = time.monotonic()
    schedule.start()
    assert schedule.finish()
    # never early; late only by scheduling delay (generous: a loaded 2-core machine)
    assert [c for c, _, _ in cluster.calls] == ["kill", "start"]
    for (_, _, t), at in zip(cluster.calls, (0.2, 0.6), strict=True):
        assert at - 0.01 <= t - t0 < at + 0.3, (at, t - t0)
    rows = read_faults(tmp_path)
    assert [(r.fault, r.outcome) for r in rows] == [("kill bk1-eu", "ok"), ("start bk1-eu", "ok"), ("boom bk2-eu", "error")]
    assert rows[2].error == "the node refused" and rows[2].done is None and rows[2].nodes == ()
    assert rows[0].ts <= rows[0].effect_ts <= rows[0].ended_ts and rows[1].effect_ts is None  # a start damages nothing
    [error] = schedule.errors  # at the time it ran: 0.7 s, or a little later on a loaded machine
    said = re.fullmatch(r"boom bk2-eu at (\d+\.\d)s: the node refused", error)
    assert said and 0.7 <= float(said.group(1)) <= 1.0, error
    assert [(w.condition, w.held) for w in schedule.waits] == [
        ("node_dead bk1-eu", True), ("node_alive bk1-eu", True), ("node_dead bk2-us", False)]
    assert schedule.waits[2].seconds == pytest.approx(0.3, abs=0.2) and schedule.waits[2].seen == "bk2-us alive"


def test_an_action_says_what_it_did_and_to_which_nodes() -> None:
    cluster = Recorder()
    done = actions.run_fault(cluster, Fault(0, "region-loss", ("us",)))  # type: ignore[arg-type]
    assert isinstance(done, Done) and set(done.nodes) == {n.name for n in cluster.topo.nodes if n.region == "us"}
    assert done.at_ns is not None and done.at_ns <= time.time_ns()  # when the last of them stopped


@pytest.mark.parametrize("text", ["kill bk1-eu", "soon kill bk1-eu", "-1 kill bk1-eu", "10"])
def test_a_workload_fault_that_is_not_at_action_args_is_a_usage_error(text: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pulsarlab.cli import app

    result = CliRunner().invoke(app, ["workload", "run", "--out", str(tmp_path / "run"), "--fault", text,
                                      "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 2, result.output
    assert "expected 'AT ACTION ARGS...'" in result.stderr and not (tmp_path / "run").exists()


def test_fault_text_is_at_action_args() -> None:
    assert Fault.parse("10 kill bk1-eu bk2-eu") == Fault(10.0, "kill", ("bk1-eu", "bk2-eu"))
    assert Fault.parse("2.5 heal") == Fault(2.5, "heal")


def test_a_fault_whose_command_failed_keeps_the_cause_from_the_end_of_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node action through Ansible that fails says why only at the end of a long output (the
    host unreachable): the history row keeps the command and that end, and every one-line account of
    the failure (the scheduler's errors, what it says) names both."""
    output = "\n".join(f"TASK [step {i}] ok: [bk1-eu]" for i in range(400)) + "\nbk1-eu: UNREACHABLE! ssh: connect timed out"

    def unreachable(c, args):
        raise ProcessFailedError(["ansible-playbook", "node.yml", "--limit", "bk1-eu"], 4, output)

    monkeypatch.setitem(actions.ACTIONS, "kill", unreachable)
    said: list[str] = []
    schedule = Scheduler(Recorder(), [Fault(0, "kill", ("bk1-eu",))], history=tmp_path, say=said.append)  # type: ignore[arg-type]
    assert schedule.start().finish()
    [row] = read_faults(tmp_path)
    assert row.outcome == "error" and row.error is not None and len(row.error) <= ERROR_CHARS
    assert row.error.startswith("command failed with exit code 4: ansible-playbook node.yml --limit bk1-eu")
    assert row.error.endswith("bk1-eu: UNREACHABLE! ssh: connect timed out")
    line = ("command failed with exit code 4: ansible-playbook node.yml --limit bk1-eu"
            " ... bk1-eu: UNREACHABLE! ssh: connect timed out")
    [error] = schedule.errors  # at the time it ran: at once, or a little later on a loaded machine
    when = re.fullmatch(r"kill bk1-eu at (\d+\.\d)s: (.*)", error)
    assert when and float(when.group(1)) <= 0.3 and when.group(2) == line, error
    assert any(s.endswith(line) for s in said), said
