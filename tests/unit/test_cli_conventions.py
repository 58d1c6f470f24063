"""What users expect of any command-line tool: -h beside --help everywhere, --version, and numeric
options that refuse values they cannot mean (exit 2, nothing run)."""

from __future__ import annotations

from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app

runner = CliRunner()


def test_version_names_pulsarlab_and_the_default_pulsar_release() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0
    assert r.stdout.startswith(f"pulsarlab {version('pulsarlab')} (Pulsar 4.0.")


@pytest.mark.parametrize("args", [["-h"], ["scenario", "run", "-h"], ["node", "kill", "-h"], ["attach", "-h"]])
def test_dash_h_is_help_on_every_level(args: list[str]) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and r.stdout.startswith("Usage: pulsarlab"), r.output


@pytest.mark.parametrize("args", [
    ["attach", "--timeout", "-1"],
    ["chaos", "await-replicated", "persistent://t/n/x", "--timeout", "-3"],
    ["monitoring", "up", "--port", "0"],
    ["monitoring", "up", "--port", "70000"],
])
def test_a_value_an_option_cannot_mean_is_a_usage_error(args: list[str], tmp_path) -> None:
    r = runner.invoke(app, [*args, "--state-dir", str(tmp_path / "none")])
    assert r.exit_code == 2, r.output
    assert "Invalid value" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "none").exists()


def test_commands_that_read_nodes_say_so_when_nothing_answers(tmp_path) -> None:
    """A recorded smoke cluster whose nodes never ran: no empty table with exit 0."""
    from pulsarlab.render import write_topology
    from pulsarlab.runtime.state import ClusterState
    from pulsarlab.topology import load

    topo, state = load("smoke"), tmp_path / "dead"
    state.mkdir()
    ClusterState(name=topo.name, runtime="local", topology_ref=topo.name).save(state)
    write_topology(topo, state)
    bookies = runner.invoke(app, ["inspect", "bookies", "--state-dir", str(state)])
    assert bookies.exit_code == 1 and "not running, no counters: bk1, bk2, bk3" in bookies.stderr
    replication = runner.invoke(app, ["inspect", "replication", "--state-dir", str(state)])
    assert replication.exit_code == 0 and "replicates no namespace" in replication.stderr


@pytest.mark.parametrize(("where", "bad", "field"), [
    (("nodes", 0, "name"), "../../x", "nodes[0].name"),
    (("nodes", 0, "name"), ".hidden", "nodes[0].name"),
    (("clusters", 0, "name"), "a/b", "clusters[0].name"),
    (("name",), "../up", "name"),
    (("namespaces", 0, "name"), "smoke/.x", "namespaces[0].name"),
    (("regions", 0), "eu west", "regions[0]"),
])
def test_a_name_that_could_leave_its_folder_is_refused_and_nothing_is_written(where, bad, field, tmp_path) -> None:
    import yaml

    from pulsarlab.topology import BUILTIN_DIR

    data = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = bad
    if where == ("clusters", 0, "name"):
        data["clusters"][0]["name"] = bad  # every reference is checked after the name itself
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    r = runner.invoke(app, ["render", "--topology", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    shown = bad.split("/")[-1] if field.startswith("namespaces") else bad
    assert f"{field}: {shown!r} is not a name" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]  # nothing written, inside --out or beside it


def test_a_scenario_name_names_its_run_folder_so_it_must_be_a_name() -> None:
    from pulsarlab.scenarios.model import ScenarioError, parse_scenario

    data = {"name": "../../etc", "topology": "sync", "workload": {"rate": 10, "duration": 5}}
    with pytest.raises(ScenarioError, match="name: '../../etc' is not a name"):
        parse_scenario(data, "x.yaml")


def test_brackets_in_an_error_are_shown_as_they_are() -> None:
    r = runner.invoke(app, ["scenario", "run", "[red]x[/red]"])
    assert r.exit_code == 2 and "scenario '[red]x[/red]' is neither a built-in" in r.stderr, r.stderr


@pytest.mark.parametrize("garbage", ["{not json", '{"name": 3}', "[1, 2]", ""])
def test_a_corrupt_state_file_is_named_with_what_to_do_and_no_traceback(garbage: str, tmp_path) -> None:
    (tmp_path / "state.json").write_text(garbage)
    for args in (["status"], ["down"], ["up", "--topology", "smoke"]):
        r = runner.invoke(app, [*args, "--state-dir", str(tmp_path)])
        assert r.exit_code == 1, (args, r.output)
        assert f"{tmp_path / 'state.json'} is not a state file pulsarlab can read" in " ".join(r.stderr.split())
        assert "Traceback" not in r.output and "traceback in" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # nothing else written or started


def test_ls_lists_every_known_cluster_wherever_its_folder_is(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json as jsonlib

    from pulsarlab.render import write_topology
    from pulsarlab.runtime.state import ClusterState
    from pulsarlab.topology import load

    monkeypatch.setenv("PULSARLAB_KNOWN_CLUSTERS", str(tmp_path / "known"))
    assert jsonlib.loads(runner.invoke(app, ["ls", "--json"]).stdout) == []
    folders = {}
    for name, runtime in (("smoke", "local"), ("sync", "external")):
        topo, state = load(name), tmp_path / "elsewhere" / f"{name}-state"
        ClusterState(name=topo.name, runtime=runtime, topology_ref=topo.name).save(state)
        write_topology(topo, state)
        folders[name] = state
    gone = tmp_path / "gone"
    ClusterState(name="smoke", runtime="local", topology_ref="smoke").save(gone)
    (gone / "state.json").unlink()  # taken down: forgotten by the next ls
    monkeypatch.chdir(tmp_path / "elsewhere")  # any working directory
    r = runner.invoke(app, ["ls", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["name"]: row for row in jsonlib.loads(r.stdout)}
    assert set(rows) == {"smoke", "sync"}
    assert rows["smoke"]["state_dir"] == str(folders["smoke"].resolve()) and rows["smoke"]["runtime"] == "local"
    assert rows["smoke"]["running"] == 0 and rows["smoke"]["nodes"] == 5 and rows["sync"]["runtime"] == "external"
    assert len(list((tmp_path / "known").glob("*.path"))) == 2
    (folders["sync"] / "state.json").write_text("{broken")
    r = runner.invoke(app, ["ls"])
    assert r.exit_code == 1 and "state that cannot be read" in r.stderr and "sync-state" in r.stdout


def test_ls_passes_over_a_cluster_taken_down_while_it_lists(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``down`` that removes a state folder's state between ``ls`` finding the folder and reading
    it (a CI run saw it): the cluster is gone, not unreadable, and ls succeeds without it."""
    import json as jsonlib

    from pulsarlab import ops
    from pulsarlab.render import write_topology
    from pulsarlab.runtime.state import ClusterState
    from pulsarlab.topology import load

    monkeypatch.setenv("PULSARLAB_KNOWN_CLUSTERS", str(tmp_path / "known"))
    topo, here, going = load("smoke"), tmp_path / "here", tmp_path / "going"
    for state in (here, going):
        ClusterState(name=topo.name, runtime="local", topology_ref=topo.name).save(state)
        write_topology(topo, state)
    listed = ops.known_state_dirs()
    assert sorted(listed) == sorted([here.resolve(), going.resolve()])
    (going / "state.json").unlink()  # the down, after the listing
    monkeypatch.setattr(ops, "known_state_dirs", lambda: listed)
    r = runner.invoke(app, ["ls", "--json"])
    assert r.exit_code == 0, r.output
    assert [row["state_dir"] for row in jsonlib.loads(r.stdout)] == [str(here.resolve())]


def test_the_pulsar_clients_log_lines_never_reach_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    """The C++ client writes on the process's own stdout unless told otherwise: a refused connection
    (a broker down during a fault) would land in the middle of a --json document."""
    import pulsar

    from pulsarlab.security.client import CLIENT_LOG, client

    before = CLIENT_LOG.stat().st_size if CLIENT_LOG.exists() else 0
    c = client("pulsar://127.0.0.1:1", operation_timeout=2)  # nothing listens there: refused
    try:
        with pytest.raises(pulsar.PulsarException):
            c.create_producer("persistent://public/default/nowhere")
    finally:
        c.close()
    shown = capfd.readouterr()
    assert "Connection refused" not in shown.out and "ClientConnection" not in shown.out
    assert "Connection refused" in CLIENT_LOG.read_text(errors="replace")[before:]


def test_into_a_pipe_lines_are_as_long_as_they_are() -> None:
    """rich would wrap at 80 columns when stdout is no terminal: each scenario on one line instead."""
    import os
    import subprocess
    import sys

    from pulsarlab.scenarios.model import builtin_names

    done = subprocess.run([sys.executable, "-m", "pulsarlab.cli", "scenario", "list"], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == len(builtin_names()) and max(len(r) for r in rows) > 120


@pytest.mark.parametrize(("what", "args"), [
    ("topology", ["render", "--topology", "{file}", "--out", "{tmp}/out"]),
    ("scenario", ["scenario", "run", "{file}", "--out", "{tmp}/out"]),
])
def test_a_yaml_mistake_is_one_line_naming_file_line_and_column(what: str, args: list[str], tmp_path) -> None:
    bad = tmp_path / f"{what}.yaml"
    bad.write_text("name: x\nnodes: [\n  - a\n")
    r = runner.invoke(app, [a.format(file=bad, tmp=tmp_path) for a in args])
    assert r.exit_code == 2, r.output
    assert f"{bad}:3:3: expected the node content, but found '-' (while parsing a flow node)" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "<unicode string>" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_a_broken_topology_record_in_a_state_folder_is_named(tmp_path) -> None:
    from pulsarlab.runtime.state import ClusterState

    ClusterState(name="smoke", runtime="local", topology_ref="smoke").save(tmp_path)
    (tmp_path / "topology.yaml").write_text("name: [x\n")
    r = runner.invoke(app, ["status", "--state-dir", str(tmp_path)])
    assert r.exit_code == 1 and f"{tmp_path / 'topology.yaml'}:2:1:" in r.stderr and "Traceback" not in r.output


def test_validate_checks_a_topology_or_a_scenario_file_without_starting_anything(tmp_path) -> None:
    import json as jsonlib

    from pulsarlab.scenarios.model import BUILTIN_DIR as SCENARIOS
    from pulsarlab.topology import BUILTIN_DIR as TOPOLOGIES

    topo = runner.invoke(app, ["validate", str(TOPOLOGIES / "sync.yaml"), "--json"])
    assert topo.exit_code == 0 and jsonlib.loads(topo.stdout) == {
        "file": str(TOPOLOGIES / "sync.yaml"), "kind": "topology", "name": "sync", "valid": True}
    sc = runner.invoke(app, ["validate", str(SCENARIOS / "kill-ensemble-bookie.yaml")])
    assert sc.exit_code == 0 and "a valid scenario (kill-ensemble-bookie)" in sc.stdout
    bad = tmp_path / "s.yaml"
    bad.write_text("name: s\ntopology: sync\nworkload: {rate: 10, duration: 5}\nschedule: [{at: 1, fault: kill bk9}]\n")
    r = runner.invoke(app, ["validate", str(bad)])
    assert r.exit_code == 2 and "schedule[0].fault" in r.stderr and "bk9" in r.stderr
    assert runner.invoke(app, ["validate", str(tmp_path / "missing.yaml")]).exit_code == 2


def test_a_topology_with_several_mistakes_names_them_all(tmp_path) -> None:
    import yaml

    from pulsarlab.topology import BUILTIN_DIR

    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    data["nodes"][5]["cluster"] = "nope"
    data["nodes"][6]["ports"] = {"service": 70000}
    data["namespaces"][1]["persistence"] = {"ensemble": 9, "write_quorum": 2, "ack_quorum": 2}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    r = runner.invoke(app, ["validate", str(path)])
    assert r.exit_code == 2
    said = " ".join(r.stderr.split())
    # the three, and what follows from them (pulsar1-eu, in no known cluster, cannot be an isolation primary)
    assert said.startswith("error: invalid topology, 4 problems:"), said
    assert "isolation[0](ns-is-policy-eu).primary: 'pulsar1-eu' is not a broker of cluster mycluster" in said
    for field in ("nodes[5](pulsar1-eu).cluster", "nodes[6](pulsar2-eu).ports", "namespaces[1](mytenant/us).persistence"):
        assert field in said, (field, said)


@pytest.mark.parametrize(("runtime", "record"), [("docker", "docker.json"), ("compose", "compose-attached.json")])
def test_a_corrupt_runtime_record_is_named_too(runtime: str, record: str, tmp_path) -> None:
    from pulsarlab.render import write_topology
    from pulsarlab.runtime.state import ClusterState
    from pulsarlab.topology import load

    ClusterState(name="smoke", runtime=runtime, topology_ref="smoke").save(tmp_path)
    write_topology(load("smoke"), tmp_path)
    (tmp_path / record).write_text("{cut short")
    r = runner.invoke(app, ["status", "--state-dir", str(tmp_path)])
    assert r.exit_code == 1 and f"{tmp_path / record} is not a record pulsarlab can read" in " ".join(r.stderr.split())
    assert "Traceback" not in r.output and "traceback in" not in r.stderr


def _leaf_commands(group, path=()):  # every runnable command of the CLI, with its words
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            yield from _leaf_commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_every_command_that_takes_a_topology_takes_it_as_the_topology_option(tmp_path) -> None:
    """--topology on every command that acts on a topology (validators of a file excepted: they take
    the file they check); a topology given where an option belongs is refused with the command to type."""
    import typer.main

    root = typer.main.get_command(app)
    with_topology = []
    for words, cmd in _leaf_commands(root):
        for param in cmd.params:
            if param.name in ("topology", "topologies"):
                assert param.param_type_name == "option" and "--topology" in param.opts, (words, param)
                with_topology.append(" ".join(words))
    assert {"up", "render", "attach", "compose write"} <= set(with_topology), with_topology

    r = runner.invoke(app, ["compose", "write", "sync", "geo", "--out", str(tmp_path / "out")])
    assert r.exit_code == 2 and "pulsarlab compose write --topology sync --topology geo" in r.output, r.output
    assert not (tmp_path / "out").exists()
    r = runner.invoke(app, ["compose", "write", "-t", "smoke", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0 and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["smoke.yml"], r.output
