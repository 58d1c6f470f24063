"""Scenarios on a running deployment (``scenario run --on``): which scenarios fit a deployment's
topology, what is skipped and why, and the usage errors before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.render import write_topology
from pulsarlab.runtime.external import ExternalCluster
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.runtime.state import ClusterState
from pulsarlab.scenarios import batch
from pulsarlab.scenarios.model import load, misfits, parse_scenario
from pulsarlab.scenarios.verdict import SKIPPED, ScenarioVerdict
from pulsarlab.topology import Topology
from pulsarlab.topology import load as load_topology
from pulsarlab.verify.model import FAIL, PASS

runner = CliRunner()


def recorded(tmp_path: Path, topo: Topology, runtime: str) -> Path:
    """A state folder as ``up`` (local) or ``attach`` (external) leaves it; no node runs."""
    state = tmp_path / f"{topo.name}-{runtime}"
    state.mkdir()
    ClusterState(name=topo.name, runtime=runtime, topology_ref=topo.name).save(state)
    write_topology(topo, state)
    return state


def test_a_scenario_fits_the_topology_it_was_written_for() -> None:
    assert misfits(load("sync-region-loss"), load_topology("sync")) == []
    assert misfits(load("geo-region-loss-and-return"), load_topology("geo")) == []


def test_another_topology_is_named_with_what_it_lacks() -> None:
    problems = misfits(load("sync-region-loss"), load_topology("geo"))
    assert problems == ["workload.namespace: no namespace 'mytenant/eu' in topology 'geo'"], problems


def test_a_setting_the_scenario_changes_for_itself_must_already_be_the_deployments() -> None:
    sc = load("control-no-redundancy")
    smoke = load_topology("smoke")
    problems = misfits(sc, smoke)
    assert any("skip_unrecoverable_data True; the deployment has False" in p for p in problems), problems
    # a deployment made with the same settings fits
    assert misfits(sc, sc.topology_model()) == []


def test_on_a_deployment_the_runs_that_do_not_fit_are_planned_as_skipped(tmp_path: Path) -> None:
    sync = LocalCluster(load_topology("sync"), recorded(tmp_path, load_topology("sync"), "local"))
    plan = batch.plan_runs(["sync-bookie-loss", "control-no-dedup"], 2, tmp_path / "out", on=sync)
    assert [(p.run_dir.name, p.skip is None) for p in plan] == [
        ("sync-bookie-loss-1", True), ("sync-bookie-loss-2", True),
        ("control-no-dedup-1", False), ("control-no-dedup-2", False)]
    assert "no namespace 'smoke/test'" in (plan[2].skip or "")


def test_a_skipped_run_is_shown_not_judged() -> None:
    skipped = ScenarioVerdict("control-no-dedup", "x", True, skipped="no namespace 'smoke/test'")
    passed = ScenarioVerdict("sync-bookie-loss", "y", False)
    passed.expectations = [type("J", (), {"status": PASS})()]  # type: ignore[list-item]
    assert skipped.status == SKIPPED and skipped.exit_code == 0
    assert skipped.to_json()["skipped"] == "no namespace 'smoke/test'"
    assert batch.overall([skipped, passed]) == PASS
    failed = ScenarioVerdict("sync-bookie-loss", "z", False)
    failed.expectations = [type("J", (), {"status": FAIL})()]  # type: ignore[list-item]
    assert batch.overall([skipped, failed]) == FAIL
    assert batch.overall([skipped]) != PASS  # nothing ran: nothing proven


def test_an_attached_deployment_cannot_run_a_scenario_and_says_why(tmp_path: Path) -> None:
    attached = ExternalCluster(load_topology("sync"), recorded(tmp_path, load_topology("sync"), "external"))
    with pytest.raises(Exception, match="no control of this deployment's nodes"):
        batch.plan_runs(["sync-region-loss"], 1, tmp_path / "out", on=attached)


@pytest.mark.parametrize(("case", "words"), [
    ("no-state", "no pulsarlab cluster in"),
    ("runtime-too", "--runtime chooses the fresh clusters' runtime"),
    ("nothing-fits", "no scenario asked for can run on the 'sync' deployment"),
    ("attached", "no control of this deployment's nodes (the external runtime)"),
])
def test_scenario_run_on_refuses_bad_targets_with_exit_2_and_writes_nothing(case: str, words: str, tmp_path: Path) -> None:
    sync = load_topology("sync")
    on = tmp_path / "nowhere" if case == "no-state" else recorded(tmp_path, sync, "external" if case == "attached" else "local")
    args = ["scenario", "run", "control-no-dedup" if case == "nothing-fits" else "sync-region-loss", "--on", str(on),
            "--out", str(tmp_path / "out"), "--json"]
    if case == "runtime-too":
        args += ["--runtime", "local"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert words in " ".join(result.stderr.split()), result.stderr
    assert json.loads(result.stdout)["error"]["exit_code"] == 2
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_scenario_file_of_its_own_is_checked_against_the_deployment_too(tmp_path: Path) -> None:
    data = {"name": "mine", "topology": "sync", "workload": {"rate": 50, "duration": 20},
            "schedule": [{"at": 5, "fault": "kill bk2-us"}], "expect": {"rpo": 0}}
    sc = parse_scenario(data, "mine.yaml")
    assert misfits(sc, load_topology("sync")) == []
    assert misfits(sc, load_topology("geo")) == []  # geo has a bk2-us too
    [problem] = misfits(sc, load_topology("smoke"))
    assert "schedule[0].fault" in problem and "bk2-us" in problem, problem


def test_without_an_engine_no_compose_project_is_found_and_the_reason_is_given(tmp_path: Path) -> None:
    from pulsarlab.runtime.docker.attached import find_project

    found = find_project(load_topology("sync"), host=f"unix://{tmp_path}/no-engine.sock")
    assert found.project is None and found.containers == {}
    assert "no Docker engine answers at unix://" in found.why, found.why
