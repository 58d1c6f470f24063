"""Command behaviour that needs no JVM: bad input gets one clear error and a non-zero exit."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import yaml
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.topology import BUILTIN_DIR, BUILTINS
from tests.topology_files import builtin_at

runner = CliRunner()


def test_topologies_lists_every_builtin() -> None:
    result = runner.invoke(app, ["topologies", "--json"])
    assert result.exit_code == 0
    assert set(json.loads(result.stdout)) == set(BUILTINS)


def test_render_writes_one_folder_per_node(tmp_path: Path) -> None:
    result = runner.invoke(app, ["render", "--topology", "sync", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "nodes").iterdir()) == sorted(
        ["zk", "bk1-eu", "bk2-eu", "bk1-us", "bk2-us", "pulsar1-eu", "pulsar2-eu", "pulsar1-us", "pulsar2-us"])


def test_invalid_topology_file_names_the_field(tmp_path: Path) -> None:
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    data["clusters"][0]["persistence"]["write_quorum"] = 3
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(data))
    state = tmp_path / "state"
    result = runner.invoke(app, ["up", "--topology", str(f), "--state-dir", str(state)])
    assert result.exit_code == 2  # bad input, found before anything starts
    assert "clusters[0](mycluster).persistence.ensemble" in result.stderr
    assert not state.exists(), "nothing may be started or written for an invalid topology"


def test_up_refuses_a_port_in_use_before_starting_anything(tmp_path: Path) -> None:
    f = builtin_at("smoke", "127.211", tmp_path)
    with socket.socket() as s:
        s.bind(("127.211.1.5", 8080))  # the broker's web port
        s.listen()
        result = runner.invoke(app, ["up", "--topology", str(f), "--state-dir", str(tmp_path / "st")])
    assert result.exit_code == 1, result.output
    assert "port in use: 127.211.1.5:8080" in result.stderr and "pulsar1" in result.stderr
    assert not list((tmp_path / "st").glob("nodes/*/node.pid"))


def test_status_without_a_cluster_is_a_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["status", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "no pulsarlab cluster" in result.stderr


def test_unknown_node_is_named(tmp_path: Path) -> None:
    runner.invoke(app, ["render", "--topology", "smoke", "--out", str(tmp_path)])
    (tmp_path / "state.json").write_text(json.dumps({"name": "smoke", "runtime": "local", "topology_ref": "smoke"}))
    result = runner.invoke(app, ["node", "kill", "bk9", "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "no node 'bk9'" in result.stderr


def test_a_workload_whose_drivers_sent_nothing_fails_and_says_why(tmp_path: Path, monkeypatch) -> None:
    from pulsarlab import ops
    from pulsarlab.workload.run import Counters, WorkloadResult

    reports = ["p0: exited with 1; log tail:\nPulsarClientException: topic not found"]
    monkeypatch.setattr(ops, "workload_run", lambda *a, **k: WorkloadResult(tmp_path, Counters(), 1.0, 0.0, reports))
    result = runner.invoke(app, ["workload", "run", "--out", str(tmp_path / "run"), "--duration", "1"])
    assert result.exit_code == 1
    assert "p0: exited with 1" in result.output and "no message was sent" in result.output


def test_a_workload_with_a_failed_driver_exits_non_zero_naming_it(tmp_path: Path, monkeypatch) -> None:
    from pulsarlab import ops
    from pulsarlab.history.manifest import DriverOutcome
    from pulsarlab.workload.run import Counters, WorkloadResult

    failed = [DriverOutcome("read-smoke", "read", "read-smoke", -9, True, "died by signal SIGKILL")]
    result = WorkloadResult(tmp_path, Counters(invoked=10, acked=10), 1.0, 10.0, [], failed, "r20260101-000000-abcd")
    monkeypatch.setattr(ops, "workload_run", lambda *a, **k: result)
    outcome = runner.invoke(app, ["workload", "run", "--out", str(tmp_path / "run"), "--duration", "1"])
    assert outcome.exit_code == 1
    assert "driver read-smoke (read) failed: died by signal SIGKILL" in outcome.stderr


def test_image_is_a_docker_option(tmp_path: Path) -> None:
    """--image names the docker runtime's image; on the local runtime it is a usage error, nothing rendered."""
    from typer.testing import CliRunner

    from pulsarlab.cli import app

    runner = CliRunner()
    refused = runner.invoke(app, ["render", "--topology", "smoke", "--out", str(tmp_path / "l"), "--image", "x/y:1"])
    assert refused.exit_code == 2 and "--image is for the docker runtime" in refused.stderr
    assert not (tmp_path / "l").exists()
    done = runner.invoke(app, ["render", "--topology", "smoke", "--out", str(tmp_path / "d"), "--runtime", "docker",
                               "--image", "apachepulsar/pulsar:4.0.8"])
    assert done.exit_code == 0, done.output
    assert 'image: "apachepulsar/pulsar:4.0.8"' in (tmp_path / "d" / "compose.yaml").read_text()
