"""Clients that fail over between clusters by themselves, without a cluster: the history says which
cluster served each event, the scenario's figures (time to move, time back, async RPO) come from
hand-made histories, and the settings are checked before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsarlab.history import write_table
from pulsarlab.history.faults import FaultJournal, FaultRow
from pulsarlab.history.journal import EVENTS_SUFFIX, read_events, write_meta
from pulsarlab.scenarios.failover import failover_of_run
from pulsarlab.scenarios.model import ScenarioError, load, parse_scenario
from pulsarlab.scenarios.verdict import judge
from pulsarlab.verify.model import FAIL, INCONCLUSIVE, PASS
from pulsarlab.workload.run import Target, WorkloadConfig, failover_problem
from tests.unit.test_journal import records, write_strings
from tests.unit.test_scenarios import BASE, T0, S, verdict

EU, US = "cluster-eu", "cluster-us"


@pytest.mark.parametrize(("part", "constants"), [("producer-p0", {"producer": "p0"}), ("consumer-c0", {"consumer": "c0"})])
def test_each_event_names_the_cluster_that_served_it(tmp_path: Path, part: str, constants: dict) -> None:
    base = tmp_path / part
    write_meta(base, {**constants, "cluster": EU}, clusters_from=[(200, US), (400, EU)])
    write_strings(base, [])
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(records(*({"kind": 1, "ts": t} for t in (100, 200, 399, 400, 500))).tobytes())
    rows = read_events(base).to_pylist()
    assert [r["served_by"] for r in rows] == [EU, US, US, EU, EU]
    # a send's cluster is where it went; a consumer's stays its subscription's (one subscription)
    expected = [EU, US, US, EU, EU] if "producer" in constants else [EU] * 5
    assert [r["cluster"] for r in rows] == expected


def sends(seqs: range, at: float, cluster: str, step: float = 0.1) -> list[dict]:
    rows = []
    for i, seq in enumerate(seqs):
        ts = T0 + int((at + i * step) * S)
        rows.append({"op": "send", "type": "ok", "producer": "p0", "seq": seq, "ts": ts, "cluster": cluster,
                     "served_by": cluster})
    return rows


def reads(seqs: list[int], cluster: str) -> list[dict]:
    return [{"op": "read", "producer": "p0", "seq": s, "read_index": i, "cluster": cluster, "topic": "t", "ts": T0}
            for i, s in enumerate(seqs)]


def history(tmp_path: Path, us_log: list[int]) -> Path:
    """p0 acks 0-49 on eu (0-4.9 s), eu lost at 5 s, 50-99 acked on us from 8 s, eu started from
    10 s (its start returning at 25 s, once every node is ready), 100-149 acked on eu again from
    18 s; us stored ``us_log`` in that order."""
    write_table(tmp_path, "producer-p0", sends(range(50), 0.0, EU) + sends(range(50, 100), 8.0, US)
                + sends(range(100, 150), 18.0, EU))
    write_table(tmp_path, "read-us", reads(us_log, US))
    journal = FaultJournal(tmp_path)
    journal.append(FaultRow(0, "kill", ("pulsar1-eu",), ("pulsar1-eu",), "applied", 5.0, T0 + 5 * S, T0 + 5 * S, "ok", "k"))
    journal.append(FaultRow(1, "start", ("pulsar1-eu",), ("pulsar1-eu",), "healed", 10.0, T0 + 10 * S, T0 + 25 * S, "ok", "s"))
    return tmp_path


def test_failover_figures_from_the_history(tmp_path: Path) -> None:
    # us held 0-44 when the clients came (45-49 reached it only once eu was back, after 50-99)
    fo = failover_of_run(history(tmp_path, [*range(45), *range(50, 100), *range(45, 50), *range(100, 150)]))
    (p0,) = fo.clients
    assert (p0.home, p0.moved_to) == (EU, [US])
    # back 8 s after eu's start began, though the start returned 7 s later
    assert p0.failover_s == pytest.approx(3.0) and p0.switch_back_s == pytest.approx(8.0)
    assert fo.lost_cluster == EU and (fo.async_rpo, fo.acked_before_loss) == (5, 50)


def test_nothing_missing_when_replication_had_caught_up(tmp_path: Path) -> None:
    fo = failover_of_run(history(tmp_path, [*range(50), *range(50, 150)]))
    assert fo.async_rpo == 0


def failover_scenario(**expect):
    return parse_scenario({**BASE, "workload": {**BASE["workload"], "client_failover": True}, "expect": expect})


def test_the_bounds_are_judged_and_a_figure_missing_is_not_a_pass(tmp_path: Path) -> None:
    fo = failover_of_run(history(tmp_path, [*range(45), *range(50, 100), *range(45, 50)]))
    sc = failover_scenario(failover_max_s=2, switch_back_max_s=10, async_rpo_max=10)
    by_name = {j.name: j.status for j in judge(sc, verdict({}), None, [], None, fo)}
    assert by_name["clients fail over"] == FAIL and by_name["clients switch back"] == PASS
    assert by_name["async RPO (acked on the lost cluster, missing on the other)"] == PASS
    assert {j.status for j in judge(sc, verdict({}), None, [], None, None) if "clients" in j.name} == {INCONCLUSIVE}


def test_failover_bounds_need_clients_that_fail_over() -> None:
    with pytest.raises(ScenarioError, match=r"expect\.failover_max_s: .*set workload\.client_failover"):
        parse_scenario({**BASE, "expect": {"failover_max_s": 10}})
    assert load("geo-client-failover").workload_config("x").client_failover


def test_failover_needs_a_replicated_topic() -> None:
    cfg = WorkloadConfig("persistent://t/n/x", client_failover=True)
    alone = Target(EU, "pulsar://eu:6650", read_clusters={EU: "pulsar://eu:6650"})
    assert "replicated to another cluster" in (failover_problem(cfg, alone) or "")
    both = Target(EU, "pulsar://eu:6650", read_clusters={EU: "a", US: "b"}, replication=[EU, US])
    assert failover_problem(cfg, both) is None
    assert failover_problem(WorkloadConfig("x"), alone) is None
