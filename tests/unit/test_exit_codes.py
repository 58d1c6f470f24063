"""One exit code per error class, applied by the CLI's one handler (DESIGN: 0 pass, 1 check failed
or unhealthy, 2 usage or bad input before anything starts, 3 inconclusive), through the real
command line: the one reason on stderr, and with --json a JSON object on stdout unless the command
already printed its result there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import pulsarlab.admin.client
import pulsarlab.admin.metrics
import pulsarlab.admin.reconcile
import pulsarlab.history.location
import pulsarlab.monitoring.prometheus
import pulsarlab.report.rundir
import pulsarlab.scenarios.model  # noqa: F401 - each defines an error class the table must cover
from pulsarlab import ops
from pulsarlab.cli import app
from pulsarlab.errors import PulsarlabError
from pulsarlab.topology import BUILTIN_DIR

runner = CliRunner()

# the documented code of every error class pulsarlab reports (a new class must be added here)
DOCUMENTED = {
    "PulsarlabError": 1, "Outcome": 1, "CheckFailed": 1, "WorkloadFailed": 1, "StateError": 1, "DistributionError": 1,
    "PortInUseError": 1, "NodeStartError": 1, "ProcessFailedError": 1, "DockerClientMissingError": 1,
    "DockerEngineError": 1, "ComposePluginMissingError": 1, "ImageMissingError": 1, "ImageBuildError": 1,
    "AdminError": 1, "MetricsError": 1, "DriftError": 1, "MonitoringError": 1, "ReportInputError": 1,
    "UsageError": 2, "TopologyError": 2, "ScenarioError": 2, "LocationError": 2,
    "Inconclusive": 3,
}


def every_error_class() -> list[type[PulsarlabError]]:
    found, todo = [], [PulsarlabError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__name__)


def raised(cls: type[PulsarlabError]) -> PulsarlabError:
    exc = cls.__new__(cls)  # each class's own arguments differ; the message is what the user reads
    Exception.__init__(exc, f"{cls.__name__} happened")
    return exc


def test_every_error_class_has_a_documented_code() -> None:
    assert {c.__name__ for c in every_error_class()} == set(DOCUMENTED)


@pytest.mark.parametrize("cls", every_error_class(), ids=lambda c: c.__name__)
def test_each_error_class_exits_with_its_code(cls: type[PulsarlabError], monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(*_a, **_k):
        raise raised(cls)

    monkeypatch.setattr(ops, "status", fails)
    plain = runner.invoke(app, ["status"])
    assert plain.exit_code == DOCUMENTED[cls.__name__]
    assert plain.stdout == "" and len(plain.stderr.splitlines()) == 1 and f"{cls.__name__} happened" in plain.stderr
    as_json = runner.invoke(app, ["status", "--json"])
    assert as_json.exit_code == DOCUMENTED[cls.__name__]
    assert json.loads(as_json.stdout)["error"] == {"type": cls.__name__, "message": f"{cls.__name__} happened",
                                                   "exit_code": DOCUMENTED[cls.__name__], "log": None}


def test_an_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ops, "status", interrupted)
    result = runner.invoke(app, ["status", "--json"])
    assert result.exit_code == 130 and json.loads(result.stdout)["error"]["type"] == "KeyboardInterrupt"


def test_an_invalid_topology_is_bad_input_and_nothing_is_written(tmp_path: Path) -> None:
    data = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    data["clusters"][0]["persistence"]["ack_quorum"] = 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["render", "--topology", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.stderr.startswith("error: invalid topology: ") and "ack_quorum" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_usage_error_with_json_is_one_json_object(tmp_path: Path) -> None:
    result = runner.invoke(app, ["verify", str(tmp_path / "nope"), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["type"] == "UsageError" and "no history folder" in result.stderr


def test_a_failed_check_keeps_its_result_as_the_only_json_document(tmp_path: Path) -> None:
    hosts = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())  # no node names an address
    (tmp_path / "hosts.yaml").write_text(yaml.safe_dump(hosts))
    result = runner.invoke(app, ["inventory", "validate", str(tmp_path / "hosts.yaml"), "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)  # the whole of stdout: the result, no error object after it
    assert doc["valid"] is False and len(doc["problems"]) == 5
    assert result.stderr.startswith("failed: ") and result.stderr.count("no address") == 5


def test_no_evidence_is_inconclusive(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert runner.invoke(app, ["render", "--topology", "smoke", "--out", str(state)]).exit_code == 0
    (state / "state.json").write_text(json.dumps({"name": "smoke", "runtime": "local", "topology_ref": "smoke"}))
    result = runner.invoke(app, ["monitoring", "status", "--state-dir", str(state), "--json"])
    assert result.exit_code == 3
    assert json.loads(result.stdout)["url"] is None
    assert result.stderr.startswith("inconclusive: Prometheus is not running")


def test_a_node_not_ready_is_unhealthy(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert runner.invoke(app, ["render", "--topology", "smoke", "--out", str(state)]).exit_code == 0
    (state / "state.json").write_text(json.dumps({"name": "smoke", "runtime": "local", "topology_ref": "smoke"}))
    result = runner.invoke(app, ["status", "--state-dir", str(state), "--json"])
    assert result.exit_code == 1
    assert [n["ready"] for n in json.loads(result.stdout)["nodes"]] == [False] * 5
    assert result.stderr == "failed: not ready: zk, bk1, bk2, bk3, pulsar1\n"
