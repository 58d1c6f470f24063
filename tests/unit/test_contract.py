"""The deployment contract split by purpose: a cluster pulsarlab only attached to has endpoints and
no node control, and that is a type error where control is needed, and one usage error (exit 2)
where the CLI meets it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.render import write_topology
from pulsarlab.runtime import new_deployment
from pulsarlab.runtime.external import ExternalCluster
from pulsarlab.runtime.state import ClusterState
from pulsarlab.topology import load

REPO = Path(__file__).resolve().parents[2]


def test_passing_an_attached_cluster_where_node_control_is_needed_is_a_mypy_error(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(textwrap.dedent('''\
        from pathlib import Path

        from pulsarlab.chaos.actions import Fault, run_fault
        from pulsarlab.runtime.external import ExternalCluster
        from pulsarlab.runtime.local import LocalCluster

        run_fault(LocalCluster.open(Path(".")), Fault(0, "kill", ("bk1",)))
        run_fault(ExternalCluster.open(Path(".")), Fault(0, "kill", ("bk1",)))
        '''))
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), str(snippet)],
        capture_output=True, text=True, env={**os.environ, "MYPYPATH": str(REPO)}, timeout=300,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1, done.stdout + done.stderr  # the local runtime has control: its line passes
    assert errors[0].startswith(f"{snippet}:8:") and '"ExternalCluster"; expected "NodeControl"' in errors[0], errors


def test_each_runtime_is_what_its_purpose_says(tmp_path: Path) -> None:
    topo = load("smoke")
    local = new_deployment(topo, tmp_path / "local")
    attached = ExternalCluster(topo, tmp_path / "attached")
    assert isinstance(local, NodeControl) and isinstance(attached, Endpoints) and not isinstance(attached, NodeControl)


def test_a_node_command_on_an_attached_cluster_is_one_usage_error(tmp_path: Path) -> None:
    topo = load("smoke")
    ClusterState(topo.name, "external", topo.name).save(tmp_path)  # as 'pulsarlab attach' leaves it
    write_topology(topo, tmp_path)
    for args in (["node", "stop", "bk1"], ["chaos", "heal"], ["logs", "bk1"]):
        result = CliRunner().invoke(app, [*args, "--state-dir", str(tmp_path)])
        assert result.exit_code == 2, (args, result.output)
        assert "was attached, not started, by pulsarlab" in result.stderr and "Traceback" not in result.output, args


def test_down_of_an_attached_cluster_says_it_detached_and_stopped_nothing(tmp_path: Path) -> None:
    """pulsarlab did not start an attached cluster's nodes: `down` forgets the attachment and says
    so, never "no node was running" (its nodes may well run)."""
    topo = load("smoke")
    ClusterState(topo.name, "external", topo.name).save(tmp_path)  # as 'pulsarlab attach' leaves it
    write_topology(topo, tmp_path)
    result = CliRunner().invoke(app, ["down", "--state-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "detached: pulsarlab only attached to this cluster (external runtime), so it stopped nothing" in result.stdout
    assert "no node was running" not in result.output
    assert ClusterState.load(tmp_path) is None  # forgotten: a second down finds nothing
    again = CliRunner().invoke(app, ["down", "--state-dir", str(tmp_path)])
    assert again.exit_code == 0 and "nothing to stop: no pulsarlab cluster here" in again.stdout
