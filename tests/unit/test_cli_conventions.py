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
