"""Scenarios without a cluster: validation names the field, RTO from hand-made histories, expectations
judged (controls included), and the CLI's usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.chaos import actions as chaos
from pulsarlab.cli import app
from pulsarlab.history import write_table
from pulsarlab.history.faults import FAULTS_FILE, FaultJournal, FaultRow, read_faults
from pulsarlab.scenarios.model import ScenarioError, builtin_names, load, parse_scenario
from pulsarlab.scenarios.rto import rto_of_run
from pulsarlab.scenarios.verdict import ScenarioVerdict, judge
from pulsarlab.topology import load as load_topology
from pulsarlab.verify.model import CHECKS, Check, Verdict

S = 1_000_000_000
MS = 1_000_000
T0 = 1_700_000_000 * S
runner = CliRunner()

BASE = {
    "name": "mine",
    "topology": "sync",
    "workload": {"namespace": "mytenant/eu", "rate": 100, "duration": 20},
    "schedule": [{"at": 5, "fault": "kill bk1-eu"}, {"at": 9, "fault": "start bk1-eu"},
                 {"wait": "node_alive bk1-eu", "timeout": 30}],
    "expect": {"rpo": 0, "rto_max_s": 10},
}


def with_(path: str, value) -> dict:
    """BASE with one value replaced (``a.b`` or ``schedule.0.fault``)."""
    data = json.loads(json.dumps(BASE))
    *parents, last = path.split(".")
    node = data
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


# ----- the model -------------------------------------------------------------------------------------
def test_a_valid_scenario_gives_its_faults_workload_and_expectations() -> None:
    sc = parse_scenario(BASE)
    assert [str(f) for f in sc.faults()] == ["kill bk1-eu", "start bk1-eu"]
    cfg = sc.workload_config("persistent://mytenant/eu/t")
    assert (cfg.rate, cfg.duration, cfg.topic) == (100, 20, "persistent://mytenant/eu/t")
    assert sc.expectations().forbidden  # the verifier's defaults stand
    assert not sc.control


@pytest.mark.parametrize(("path", "value", "field", "words"), [
    ("extra", 1, "extra", "Extra inputs are not permitted"),
    ("workload.rate", -1, "workload", "rate >= 0"),
    ("workload.bogus", 3, "workload.bogus", "unknown field"),
    ("workload.subscription_type", "broadcast", "workload", "subscription type must be one of"),
    ("workload.producers", "many", "workload.producers", "integer"),
    ("workload.namespace", "nope/ns", "workload.namespace", "no namespace 'nope/ns'"),
    ("workload.cluster", "elsewhere", "workload.cluster", "no cluster 'elsewhere'"),
    ("schedule.0.fault", "explode bk1-eu", "schedule[0].fault", "unknown fault action 'explode'"),
    ("schedule.0.fault", "kill bk9-eu", "schedule[0].fault", "bk9-eu"),
    ("schedule.1.at", 30, "schedule[1].at", "past the workload's 20 s"),
    ("schedule.1.at", 2, "schedule[1].at", "before the previous step's 5 s"),
    ("schedule.2.wait", "node_happy bk1-eu", "schedule[2].wait", "unknown condition 'node_happy'"),
    ("schedule.2.wait", "node_alive", "schedule[2].wait", "takes one node name"),
    ("schedule.2", {"at": 10}, "schedule[2]", "either 'fault: ACTION ARGS' or 'wait: CONDITION ARGS'"),
    ("schedule.0", {"fault": "kill bk1-eu"}, "schedule[0]", "a fault needs 'at'"),
    ("expect.rpo", -1, "expect.rpo", "greater than or equal to 0"),
    ("expect.expect_failure", ["vanished"], "expect", "unknown check(s): vanished"),
    ("expect.expect_failure", ["lsot"], "expect", "unknown check(s): lsot (did you mean lost?)"),
    ("expect.checks", {"allow": ["lost"], "permit": ["unexpected"]}, "expect.checks", "unknown expectation key(s): permit"),
    ("topology", "nowhere", "topology", "neither a built-in"),
])
def test_invalid_scenario_names_the_field(path: str, value, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(with_(path, value), "mine.yaml")
    assert info.value.field == field, str(info.value)
    assert words in str(info.value)
    assert str(info.value).startswith(f"invalid scenario mine.yaml: {field}: ")


def test_namespace_overrides_apply_to_the_scenario_only() -> None:
    data = {**BASE, "topology": {"ref": "smoke", "namespaces": {"smoke/test": {
        "persistence": {"ensemble": 1, "write_quorum": 1, "ack_quorum": 1}, "deduplication": False}}},
        "workload": {"namespace": "smoke/test", "duration": 20}, "schedule": [{"at": 5, "fault": "kill bk1"}]}
    sc = parse_scenario(data)
    ns = next(n for n in sc.topology_model().namespaces if n.name == "smoke/test")
    assert (ns.persistence.ensemble, ns.persistence.write_quorum, ns.persistence.ack_quorum) == (1, 1, 1)
    assert ns.deduplication is False
    builtin = next(n for n in load_topology("smoke").namespaces if n.name == "smoke/test")
    assert builtin.persistence is None and builtin.deduplication is None


def test_override_breaking_the_topology_names_its_field() -> None:
    data = {**BASE, "topology": {"ref": "smoke", "namespaces": {"smoke/test": {
        "persistence": {"ensemble": 4, "write_quorum": 2, "ack_quorum": 2}}}},
        "workload": {"namespace": "smoke/test", "duration": 20}, "schedule": []}
    with pytest.raises(ScenarioError, match=r"topology: invalid topology: namespaces\[0\]\(smoke/test\)\.persistence\.ensemble"):
        parse_scenario(data)
    data["topology"]["namespaces"] = {"smoke/other": {"deduplication": True}}
    with pytest.raises(ScenarioError, match="topology.namespaces.smoke/other: no such namespace"):
        parse_scenario(data)
    data["topology"] = {"ref": "smoke", "clusters": {"nowhere": {"skip_unrecoverable_data": True}}}
    with pytest.raises(ScenarioError, match="topology.clusters.nowhere: no such cluster"):
        parse_scenario(data)


def test_a_cluster_override_reaches_the_brokers_configuration(tmp_path) -> None:
    from pulsarlab.render import render
    from pulsarlab.scenarios.model import load

    topo = load("control-no-redundancy").topology_model()
    assert topo.cluster("smoke").skip_unrecoverable_data
    render(topo, tmp_path)
    [conf] = [p for p in tmp_path.rglob("broker.conf")]
    assert "autoSkipNonRecoverableData=true" in conf.read_text().splitlines()


def test_an_action_is_known_once_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scenarios name actions other modules register: refused before, accepted after."""
    data = with_("schedule.0.fault", "meteor-strike us")
    with pytest.raises(ScenarioError, match="unknown fault action 'meteor-strike': registered actions are"):
        parse_scenario(data)

    def region_only(cluster, args) -> None:
        if len(args) != 1 or args[0] not in cluster.topo.regions:
            raise ValueError(f"takes one region of {', '.join(cluster.topo.regions)}")

    monkeypatch.setitem(chaos.ACTIONS, "meteor-strike", lambda cluster, args: "lost")
    monkeypatch.setitem(chaos.VALIDATORS, "meteor-strike", region_only)
    assert str(parse_scenario(data).faults()[0]) == "meteor-strike us"
    with pytest.raises(ScenarioError, match=r"schedule\[0\]\.fault: fault meteor-strike mars: takes one region of eu, us"):
        parse_scenario(with_("schedule.0.fault", "meteor-strike mars"))


def test_topic_placeholder_is_the_run_topic() -> None:
    from pulsarlab.scenarios.model import step_fault

    sc = parse_scenario(with_("schedule.0.fault", "stop bk1-eu"))
    step = sc.schedule[0].model_copy(update={"fault": "kill owner:{topic}"})
    assert step_fault(step, "persistent://a/b/c").args == ("owner:persistent://a/b/c",)


def test_every_builtin_is_valid_or_names_a_missing_action() -> None:
    names = builtin_names()
    for required in ("sync-bookie-loss", "sync-region-loss", "geo-region-loss-and-return", "kill-topic-owner",
                     "kill-ensemble-bookie", "isolate-owner-from-zk", "power-loss", "sync-partition",
                     "control-no-redundancy", "control-no-dedup"):
        assert required in names
    for name in names:
        try:
            sc = load(name)
        except ScenarioError as exc:  # only for want of an action the chaos package registers
            assert "fault" in exc.field and ("unknown fault action" in str(exc) or "target" in str(exc)), str(exc)
            continue
        assert sc.name == name and sc.description
    assert load("control-no-dedup").control and load("control-no-dedup").expectations().allows("duplicated_in_storage")


# ----- RTO from hand-made histories -------------------------------------------------------------------
def sends(producer: str, seconds: list[float], ack_after: dict[float, float], default_latency: float = 0.01) -> list[dict]:
    """One send invoked at each of ``seconds`` (from T0), acknowledged ``default_latency`` later unless
    ``ack_after`` says when (None: never)."""
    rows = []
    for seq, t in enumerate(seconds):
        invoke = T0 + int(t * S)
        rows.append({"op": "send", "type": "invoke", "producer": producer, "seq": seq, "ts": invoke})
        ack = ack_after.get(t, t + default_latency)
        if ack is not None:
            rows.append({"op": "send", "type": "ok", "producer": producer, "seq": seq, "ts": T0 + int(ack * S)})
    return rows


def with_faults(directory: Path, faults: list[tuple[str, float, int]], failed: int | None = None) -> Path:
    """The run's faults part, as the scheduler writes it: ``(fault, offset, ns when its action returned)``;
    the one at index ``failed`` an error."""
    journal = FaultJournal(directory)
    for i, (text, at, done_ns) in enumerate(faults):
        action, *args = text.split()
        ok = i != failed
        journal.append(FaultRow(i, action, tuple(args), tuple(args), "applied", at, done_ns - S // 10, done_ns,
                                "ok" if ok else "error", "done" if ok else None, None if ok else "refused"))
    return directory


def test_a_fault_that_failed_is_not_measured(tmp_path: Path) -> None:
    write_table(tmp_path, "producer-p0", sends("p0", [i * 0.5 for i in range(11)], {}))
    rto = rto_of_run(with_faults(tmp_path, [("kill bk1-eu", 2.0, T0 + 2 * S), ("kill bk2-eu", 3.0, T0 + 3 * S)], failed=1))
    assert [f.fault for f in rto.producers[0].faults] == ["kill bk1-eu"]


def test_rto_is_fault_to_first_ack_of_a_later_send_and_the_longest_window_without_ack(tmp_path: Path) -> None:
    # p0 sends every 0.5 s for 10 s; a fault at 3.2 s; the send at 3.0 s is acked only at 3.3 s (in
    # flight across the fault: not a recovery), sends from 3.5 s on wait until 7.0 s
    times = [i * 0.5 for i in range(21)]
    stuck = {t: 7.0 for t in times if 3.5 <= t < 7.0}
    write_table(tmp_path, "producer-p0", sends("p0", times, {3.0: 3.3, **stuck}))
    # p1 never recovers: nothing it sent after the fault is acknowledged
    write_table(tmp_path, "producer-p1", sends("p1", [1.0, 2.0, 4.0, 5.0], {4.0: None, 5.0: None}))
    write_table(tmp_path, "consumer-c0", [{"op": "receive", "producer": "p0", "seq": 0, "ts": T0}])
    rto = rto_of_run(with_faults(tmp_path, [("kill bk1-eu", 3.2, T0 + int(3.2 * S))]))
    p0, p1 = rto.producers
    assert p0.producer == "p0" and p0.acked == 21
    assert p0.faults[0].recovery_s == pytest.approx(7.0 - 3.2)
    assert p0.longest_without_ack_s == pytest.approx(7.0 - 3.3)
    assert (p0.longest_from_ns, p0.longest_to_ns) == (T0 + int(3.3 * S), T0 + 7 * S)
    assert p1.faults[0].recovery_s is None
    assert p1.longest_without_ack_s == pytest.approx(5.0 - 2.01)  # to its last send event
    assert rto.max_recovery_s is None  # one producer never recovered
    assert rto.to_json()["producers"][0]["faults"][0]["recovery_s"] == pytest.approx(3.8)


def test_recovery_counts_from_when_the_damage_took_effect_when_the_fault_says_so(tmp_path: Path) -> None:
    """A kill on a remote host returns here later than it took effect there (the playbook's own end):
    recovery counts from the host's moment (``effect_ts``), and from the return when there is none."""
    times = [i * 0.5 for i in range(21)]
    write_table(tmp_path, "producer-p0", sends("p0", times, {t: 7.0 for t in times if 2.5 <= t < 7.0}))
    journal = FaultJournal(tmp_path)
    journal.append(FaultRow(0, "kill", ("bk1-eu",), ("bk1-eu",), "applied", 2.0, T0 + 2 * S, T0 + 4 * S, "ok",
                            "killed bk1-eu", effect_ts=T0 + int(2.5 * S)))
    assert rto_of_run(tmp_path).producers[0].faults[0].recovery_s == pytest.approx(7.0 - 2.5)
    assert read_faults(tmp_path)[0].effect_ts == T0 + int(2.5 * S)
    (tmp_path / FAULTS_FILE).unlink()
    with_faults(tmp_path, [("kill bk1-eu", 2.0, T0 + 4 * S)])  # no effect time: from the return, 4 s
    assert rto_of_run(tmp_path).producers[0].faults[0].recovery_s == pytest.approx(7.0 - 4.0)


def test_a_fault_after_the_last_send_has_no_recovery_to_measure(tmp_path: Path) -> None:
    # sends until 5 s; a node kill at 2 s, its start done at 9 s: only the kill is measured
    write_table(tmp_path, "producer-p0", sends("p0", [i * 0.5 for i in range(11)], {}))
    rto = rto_of_run(with_faults(tmp_path, [("kill bk1-eu", 2.0, T0 + 2 * S), ("start bk1-eu", 7.0, T0 + 9 * S)]))
    kill, start = rto.producers[0].faults
    assert (kill.sent_after, start.sent_after, start.recovery_s) == (True, False, None)
    assert rto.measured and rto.max_recovery_s == pytest.approx(kill.recovery_s)
    (tmp_path / FAULTS_FILE).unlink()
    nothing_after = rto_of_run(with_faults(tmp_path, [("start bk1-eu", 7.0, T0 + 9 * S)]))
    assert not nothing_after.measured and nothing_after.max_recovery_s is None


def test_rto_without_faults_still_has_the_longest_window(tmp_path: Path) -> None:
    write_table(tmp_path, "producer-p0", sends("p0", [0.0, 1.0, 2.0, 6.0], {}))
    rto = rto_of_run(tmp_path)  # no faults part at all
    assert rto.producers[0].faults == [] and rto.max_recovery_s is None
    assert rto.max_outage_s == pytest.approx(4.0)


# ----- expectations -------------------------------------------------------------------------------------
def verdict(counts: dict[str, int], allowed: set[str] = frozenset(), reasons: list[str] | None = None) -> Verdict:
    checks = [Check(c, counts.get(c, 0), allowed=c in allowed or c in ("order_violations_key", "recovered")) for c in CHECKS]
    return Verdict(["run"], checks, {}, reasons=reasons or [])


def status_of(data: dict, v: Verdict | None, rto=None, waits=None) -> tuple[str, dict[str, str]]:
    sc = parse_scenario(data)
    judged = judge(sc, v, rto, waits or [])
    sv = ScenarioVerdict(sc.name, "run", sc.control, expectations=judged, reasons=list(v.reasons) if v else [])
    return sv.status, {j.name: j.status for j in judged}


def test_rpo_and_checks_pass_only_when_zero(tmp_path: Path) -> None:
    data = {**BASE, "expect": {"rpo": 0}}
    assert status_of(data, verdict({}))[0] == "pass"
    status, each = status_of(data, verdict({"lost": 2}))
    assert status == "fail" and each["RPO"] == "fail" and each["check lost"] == "fail"
    allow = {**BASE, "expect": {"checks": {"allow": ["duplicated_delivery"]}}}
    status, each = status_of(allow, verdict({"duplicated_delivery": 3}))
    assert status == "pass" and "check duplicated_delivery" not in each


def test_missing_evidence_makes_rpo_inconclusive_never_pass() -> None:
    status, each = status_of({**BASE, "expect": {"rpo": 0}}, verdict({}, reasons=["no read-back of t on c"]))
    assert status == "inconclusive" and each["RPO"] == "inconclusive"
    # a decisive failure of presence still fails
    status, _ = status_of({**BASE, "expect": {"rpo": 0}}, verdict({"duplicated_in_storage": 1}, reasons=["x"]))
    assert status == "fail"


def test_a_control_passes_when_its_failure_is_detected() -> None:
    control = {**BASE, "expect": {"expect_failure": ["lost"], "checks": {"allow": ["never_delivered"]}}}
    sc = parse_scenario(control)
    assert sc.control and sc.expectations().allows("lost")
    status, each = status_of(control, verdict({"lost": 40, "never_delivered": 3}, allowed={"lost", "never_delivered"}))
    assert status == "pass" and each["check lost"] == "pass"
    status, each = status_of(control, verdict({}, allowed={"lost", "never_delivered"}))
    assert status == "fail" and each["check lost"] == "fail"  # nothing detected: the control failed
    status, _ = status_of(control, verdict({}, allowed={"lost"}, reasons=["no read-back"]))
    assert status == "inconclusive"
    # another forbidden check going off still fails a control
    status, each = status_of(control, verdict({"lost": 4, "corrupted": 1}, allowed={"lost", "never_delivered"}))
    assert status == "fail" and each["check corrupted"] == "fail"


def test_a_check_allowed_on_one_cluster_fails_on_any_other() -> None:
    geo = {**BASE, "topology": "geo", "workload": {"namespace": "world/global", "cluster": "cluster-us"},
           "schedule": [], "expect": {"allow_on": {"duplicated_in_storage": ["cluster-eu"]}}}

    def dup(by_cluster: dict[str, int], reasons: list[str] | None = None) -> Verdict:
        v = verdict({"duplicated_in_storage": sum(by_cluster.values())}, allowed={"duplicated_in_storage"}, reasons=reasons)
        v.check("duplicated_in_storage").by_cluster = by_cluster
        return v

    assert parse_scenario(geo).expectations().allows("duplicated_in_storage")
    status, each = status_of(geo, dup({"cluster-eu": 13}))
    assert status == "pass" and each["check duplicated_in_storage"] == "pass"
    status, each = status_of(geo, dup({"cluster-eu": 13, "cluster-us": 1}))
    assert status == "fail" and each["check duplicated_in_storage"] == "fail"
    status, _ = status_of(geo, dup({"cluster-eu": 2}, reasons=["no read-back of t on cluster-us"]))
    assert status == "inconclusive"  # duplicates on us may be in the read-back that is missing
    no_split = verdict({"duplicated_in_storage": 3}, allowed={"duplicated_in_storage"})
    assert status_of(geo, no_split)[1]["check duplicated_in_storage"] == "inconclusive"
    for where, says in [({"lost": ["cluster-eu"]}, "only checks counted per cluster"),
                        ({"duplicated_in_storage": ["cluster-mars"]}, "no cluster 'cluster-mars'")]:
        with pytest.raises(ScenarioError, match=says):
            parse_scenario({**geo, "expect": {"allow_on": where}})


def test_rto_bounds_and_waits(tmp_path: Path) -> None:
    times = [i * 0.5 for i in range(21)]
    write_table(tmp_path, "producer-p0", sends("p0", times, {t: 7.0 for t in times if 3.5 <= t < 7.0}))
    rto = rto_of_run(with_faults(tmp_path, [("kill bk1-eu", 3.2, T0 + int(3.2 * S))]))
    data = {**BASE, "expect": {"rto_max_s": 5, "outage_max_s": 5, "outage_min_s": 1}}
    assert status_of(data, verdict({}), rto)[0] == "pass"
    status, each = status_of({**BASE, "expect": {"rto_max_s": 2}}, verdict({}), rto)
    assert status == "fail" and each["RTO"] == "fail"
    status, each = status_of({**BASE, "expect": {"outage_min_s": 10}}, verdict({}), rto)
    assert each["longest window without ack (min)"] == "fail" and "longest window without ack (max)" not in each
    status, _ = status_of({**BASE, "expect": {"rto_max_s": 2}}, verdict({}), None)
    assert status == "inconclusive"  # no history: no RTO, never a pass
    wait = {"condition": "node_alive bk1-eu", "started_s": 9.0, "seconds": 30.0, "held": False, "seen": "bk1-eu not running"}
    status, each = status_of({**BASE, "expect": {}}, verdict({}), rto, [wait])
    assert status == "fail" and each["wait node_alive bk1-eu"] == "fail"


def test_no_expectation_and_no_evidence_is_inconclusive() -> None:
    sc = parse_scenario({**BASE, "expect": {}})
    assert ScenarioVerdict(sc.name, "run", False, expectations=judge(sc, None, None, [])).status == "inconclusive"


# ----- the CLI ------------------------------------------------------------------------------------------
def test_scenario_list_json_names_every_builtin_and_what_it_lacks() -> None:
    result = runner.invoke(app, ["scenario", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert set(rows) == set(builtin_names())
    assert rows["sync-bookie-loss"]["runnable"] and rows["sync-bookie-loss"]["topology"] == "sync"
    for r in rows.values():
        assert r["runnable"] or "fault" in r["problem"]


@pytest.mark.parametrize(("args", "words"), [
    (["scenario", "run"], "name the scenario(s) to run, or pass --all"),
    (["scenario", "run", "sync-bookie-loss", "--all"], "not both"),
    (["scenario", "run", "no-such-scenario"], "neither a built-in"),
    (["scenario", "run", "sync-bookie-loss", "--runtime", "vm"], "vm"),
    (["scenario", "run", "sync-bookie-loss", "sync-bookie-loss"], "scenario named twice"),
])
def test_scenario_run_usage_errors_exit_2_before_any_cluster(args: list[str], words: str, tmp_path: Path) -> None:
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_scenario_run_refuses_bad_files_and_used_folders(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(with_("schedule.0.fault", "explode bk1-eu")))
    result = runner.invoke(app, ["scenario", "run", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "schedule[0].fault: unknown fault action 'explode'" in result.stderr
    (tmp_path / "not-yaml.yaml").write_text("name: [unclosed")
    result = runner.invoke(app, ["scenario", "run", str(tmp_path / "not-yaml.yaml")])
    assert result.exit_code == 2 and "is not valid YAML" in result.stderr
    used = tmp_path / "used"
    (used / "sync-bookie-loss").mkdir(parents=True)
    (used / "sync-bookie-loss" / "x").write_text("")
    result = runner.invoke(app, ["scenario", "run", "sync-bookie-loss", "--out", str(used), "--json"])
    assert result.exit_code == 2 and "is not empty" in result.stderr
    assert json.loads(result.stdout)["error"]["exit_code"] == 2
    result = runner.invoke(app, ["scenario", "run", "sync-bookie-loss", "--repeat", "0"])
    assert result.exit_code == 2


def test_the_matrix_summary_gives_each_runs_counts_and_wall_time() -> None:
    from rich.console import Console

    from pulsarlab.cli.scenario import summary_table
    from pulsarlab.scenarios.verdict import Judged, ScenarioVerdict

    lost = ScenarioVerdict("control-no-redundancy", "/runs/control-no-redundancy", True, checks={"lost": 812, "corrupted": 0},
                           rpo=812, rto={"max_recovery_s": None, "max_outage_s": 0.2,
                                         "producers": [{"acked": 3600}]},
                           expectations=[Judged("check lost", "> 0", 812, "pass")], seconds=171.4)
    short = ScenarioVerdict("power-loss", "/runs/power-loss", False, reasons=["the run failed: no Java"], seconds=3.0)
    console = Console(width=250, record=True)
    console.print(summary_table([lost, short], "inconclusive"))
    text = console.export_text()
    assert "overall: INCONCLUSIVE (2 runs, 174 s of runs)" in text
    row = next(line for line in text.splitlines() if "control-no-redundancy" in line)
    assert all(w in row for w in ("pass", "812", "3600", "lost=812", "171")) and "corrupted" not in row
    row = next(line for line in text.splitlines() if "power-loss" in line)
    assert "inconclusive" in row and " 3 " in row


def test_a_run_topic_is_never_read_as_a_partition_whatever_the_scenario_is_called() -> None:
    """`sync-partition-16190980` (all eight hex digits decimal, about one run in forty) was refused by
    Pulsar as partition 16190980 of a topic `sync`, and the verifier's parsing agrees with Pulsar's."""
    from pulsarlab.scenarios.runner import run_tag
    from pulsarlab.verify.dims import base_topic, partition_of

    for _ in range(2000):
        topic = f"persistent://t/n/sync-partition-{run_tag()}"
        assert not topic.rsplit("-", 1)[1].isdigit(), topic  # Pulsar's test: the part after the last '-'
        assert (partition_of(topic), base_topic(topic)) == (0, topic)
