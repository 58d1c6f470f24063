"""The rolling upgrade as a fault, without a cluster: its node windows kept in the history, the publish
stall per node measured from hand-made histories and judged, and the built-in scenarios' checks."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pulsarlab.history import write_table
from pulsarlab.history.faults import FAULTS_FILE, FaultJournal, FaultRow, NodeWindow, fault_schema, read_faults
from pulsarlab.scenarios import batch
from pulsarlab.scenarios.model import ScenarioError, load, parse_scenario
from pulsarlab.scenarios.rto import rto_of_run
from pulsarlab.scenarios.verdict import judge
from pulsarlab.verify.model import FAIL, INCONCLUSIVE, PASS
from tests.unit.test_scenarios import BASE, T0, S, sends, verdict


def window(node: str, start: float, end: float) -> NodeWindow:
    return NodeWindow(node, T0 + int(start * S), T0 + int(end * S))


def upgrade_row(parts: tuple[NodeWindow, ...]) -> FaultRow:
    return FaultRow(0, "upgrade", ("4.0.8",), tuple(p.node for p in parts), "applied", 1.0, T0 + S, T0 + 20 * S, "ok",
                    "upgraded", parts=parts)


def test_each_node_window_is_kept_in_the_history_and_its_stall_measured(tmp_path: Path) -> None:
    # one send every 0.1 s from 0 to 20 s; acks held back: 3.0-5.5 s (while bk1 is away, 3-6 s) and
    # 12.0-13.0 s (pulsar1 away 10-16 s); zk (0.5-2 s) stalls nothing beyond the usual 0.1 s
    times = [round(i * 0.1, 1) for i in range(201)]
    held = {t: 5.5 for t in times if 3.0 <= t < 5.5} | {t: 13.0 for t in times if 12.0 <= t < 13.0}
    write_table(tmp_path, "producer-p0", sends("p0", times, held))
    parts = (window("zk", 0.5, 2.0), window("bk1", 3.0, 6.0), window("pulsar1", 10.0, 16.0))
    FaultJournal(tmp_path).append(upgrade_row(parts))
    assert read_faults(tmp_path)[0].parts == parts
    stalls = {s.node: s for s in rto_of_run(tmp_path).stalls}
    assert stalls["zk"].longest_without_ack_s == pytest.approx(0.1, abs=0.01)
    assert stalls["bk1"].longest_without_ack_s == pytest.approx(5.5 - 2.91, abs=0.01)  # last ack before: 2.9 s + 10 ms
    assert stalls["pulsar1"].longest_without_ack_s == pytest.approx(13.0 - 11.91, abs=0.01)
    assert stalls["pulsar1"].away_s == pytest.approx(6.0)
    # every held window ended while its node was still away: past each return only the next ack's 10 ms
    assert all(s.after_ready_s == pytest.approx(0.01, abs=0.001) for s in stalls.values())
    rto = rto_of_run(tmp_path)
    assert rto.max_stall_s == pytest.approx(stalls["bk1"].longest_without_ack_s)
    assert [s["node"] for s in rto.to_json()["stalls"]] == ["zk", "bk1", "pulsar1"]


def test_a_node_away_while_nothing_was_sent_has_no_stall(tmp_path: Path) -> None:
    write_table(tmp_path, "producer-p0", sends("p0", [i * 0.5 for i in range(11)], {}))  # sends until 5 s
    FaultJournal(tmp_path).append(upgrade_row((window("bk1", 2.0, 3.0), window("pulsar1", 8.0, 9.0))))
    stalls = rto_of_run(tmp_path).stalls
    assert [(s.node, s.longest_without_ack_s is None) for s in stalls] == [("bk1", False), ("pulsar1", True)]


def test_a_faults_file_written_before_node_windows_reads_without_them(tmp_path: Path) -> None:
    row = {n: v for n, v in asdict(upgrade_row(())).items() if n != "parts"}
    old = pa.schema([f for f in fault_schema() if f.name != "parts"])
    pq.write_table(pa.Table.from_pylist([row], schema=old), tmp_path / FAULTS_FILE)
    assert read_faults(tmp_path)[0].parts == ()


def stall_scenario(bound: float = 10.0):
    return parse_scenario({**BASE, "schedule": [{"at": 1, "fault": "upgrade 4.0.8", "timeout": 300}],
                           "end_after_schedule_s": 5, "expect": {"stall_max_s": bound}})


@pytest.mark.parametrize(("held_until", "status"), [(4.0, PASS), (15.0, FAIL)])
def test_the_stall_bound_is_judged_per_node(tmp_path: Path, held_until: float, status: str) -> None:
    times = [i * 0.5 for i in range(41)]
    write_table(tmp_path, "producer-p0", sends("p0", times, {t: held_until for t in times if 3.0 <= t < held_until}))
    FaultJournal(tmp_path).append(upgrade_row((window("bk1", 3.0, 5.0),)))
    judged = judge(stall_scenario(), verdict({}), rto_of_run(tmp_path), [])
    stall = next(j for j in judged if j.name.startswith("publish stall"))
    assert stall.status == status and "bk1" in stall.actual


@pytest.mark.parametrize(("held_until", "status"), [(7.0, PASS), (12.0, FAIL)])
def test_what_a_stall_lasts_after_its_node_is_ready_is_judged_on_its_own(tmp_path: Path, held_until: float,
                                                                           status: str) -> None:
    # bk1 away 3-5 s, acks held from 3 s: until 7 s is 2 s past its return, until 12 s is 7 s past it;
    # the whole stall (4 or 9 s) is within stall_max_s either way
    times = [i * 0.5 for i in range(41)]
    write_table(tmp_path, "producer-p0", sends("p0", times, {t: held_until for t in times if 3.0 <= t < held_until}))
    FaultJournal(tmp_path).append(upgrade_row((window("bk1", 3.0, 5.0),)))
    rto = rto_of_run(tmp_path)
    assert rto.stalls[0].after_ready_s == pytest.approx(held_until - 5.0, abs=0.01)
    assert rto.to_json()["stalls"][0]["after_ready_s"] == pytest.approx(held_until - 5.0, abs=0.01)
    sc = parse_scenario({**BASE, "schedule": [{"at": 1, "fault": "upgrade 4.0.8", "timeout": 300}],
                         "end_after_schedule_s": 5, "expect": {"stall_max_s": 10, "resume_max_s": 5}})
    judged = {j.name: j for j in judge(sc, verdict({}), rto, [])}
    assert judged["publish stall while a node restarts"].status == PASS
    resume = judged["publishing resumes once a restarted node is ready"]
    assert resume.status == status and "bk1" in resume.actual and resume.expected == "<= 5s per node"


def test_a_stall_not_measured_is_inconclusive_not_a_pass(tmp_path: Path) -> None:
    write_table(tmp_path, "producer-p0", sends("p0", [i * 0.5 for i in range(11)], {}))
    FaultJournal(tmp_path).append(upgrade_row(()))  # the upgrade moved no node: nothing to measure
    sc = parse_scenario({**BASE, "schedule": [{"at": 1, "fault": "upgrade 4.0.8", "timeout": 300}],
                         "end_after_schedule_s": 5, "expect": {"stall_max_s": 10, "resume_max_s": 5}})
    judged = judge(sc, verdict({}), rto_of_run(tmp_path), [])
    assert [j.status for j in judged if j.name.startswith(("publish stall", "publishing resumes"))] == [INCONCLUSIVE] * 2


@pytest.mark.parametrize("fault", ["upgrade", "upgrade 4.0", "upgrade 4.0.8 4.0.6"])
def test_an_upgrade_fault_names_one_release(fault: str) -> None:
    with pytest.raises(ScenarioError, match=r"schedule\[0\]\.fault: .*takes one Pulsar release"):
        parse_scenario({**BASE, "schedule": [{"at": 1, "fault": fault}]})


def test_the_builtin_rolling_scenarios_start_on_the_release_they_leave() -> None:
    for name, start, target in (("rolling-upgrade", "4.0.6", "4.0.8"), ("rolling-rollback", "4.0.8", "4.0.6")):
        sc = load(name)
        assert sc.topology_model().pulsar_version == start
        assert [(f.action, f.args) for f in sc.faults()] == [("upgrade", (target,))]
        assert sc.end_after_schedule_s is not None and sc.expect.rpo == 0
        assert sc.expect.stall_max_s is not None and sc.expect.resume_max_s is not None


class Running:
    """A running deployment as the plan sees one: its topology and release (no node control)."""

    def __init__(self, version: str) -> None:
        self.topo, self.version, self.state_dir = load("rolling-upgrade").topology_model(), version, Path("/nowhere")
        self.runtime = "local"

    def pulsar_version(self) -> str:
        return self.version


def test_a_deployment_on_another_release_does_not_fit() -> None:
    why = batch.unfit(load("rolling-upgrade"), Running("4.0.8"))  # type: ignore[arg-type]
    assert why is not None and "needs a deployment on Pulsar 4.0.6; this one runs 4.0.8" in why
