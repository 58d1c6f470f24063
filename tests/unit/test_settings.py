"""pulsarlab's settings: read from the environment in one place, with the documented defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab import distribution, settings
from pulsarlab.cli import app
from pulsarlab.errors import UsageError
from pulsarlab.runtime.docker import engine
from pulsarlab.timeouts import SECONDS as TIMEOUTS
from pulsarlab.timeouts import timeout

HOME = Path("/home/op")
runner = CliRunner()


def test_defaults_without_any_variable() -> None:
    s = settings.Settings.from_env({}, home=HOME)
    assert s.state_dir is None and s.cluster_dir("sync") == Path(".pulsarlab/sync")
    assert s.pulsar_version == settings.DEFAULT_PULSAR_VERSION
    assert s.cache_dir == HOME / ".cache/pulsarlab" and s.maven_repo == HOME / ".m2/repository"
    assert s.docker_state == HOME / ".local/state/pulsarlab/docker"
    assert s.docker_host == f"unix://{HOME}/.local/state/pulsarlab/docker/docker.sock"
    assert s.timeout_scale == 1.0
    assert (s.prometheus, s.templates_dir, s.java_home) == (None, None, None)


def test_every_variable_is_honoured_and_an_empty_one_is_unset() -> None:
    s = settings.Settings.from_env({
        "PULSARLAB_STATE_DIR": "/srv/st", "PULSARLAB_PULSAR_VERSION": "4.0.9", "XDG_CACHE_HOME": "/xdg/cache",
        "PULSARLAB_MAVEN_REPO": "/m2", "PULSARLAB_TIMEOUT_SCALE": "2.5", "XDG_STATE_HOME": "/xdg/state",
        "PULSARLAB_PROMETHEUS": "/opt/prometheus", "PULSARLAB_TEMPLATES": "/t", "JAVA_HOME": "/jdk",
        "DOCKER_HOST": "", "PULSARLAB_CACHE": "",
    }, home=HOME)
    assert s.state_dir == Path("/srv/st") and s.cluster_dir("sync") == Path("/srv/st")
    assert s.pulsar_version == "4.0.9" and s.cache_dir == Path("/xdg/cache/pulsarlab") and s.maven_repo == Path("/m2")
    assert s.timeout_scale == 2.5 and s.docker_state == Path("/xdg/state/pulsarlab/docker")
    assert s.docker_host == "unix:///xdg/state/pulsarlab/docker/docker.sock"
    assert (s.prometheus, s.templates_dir, s.java_home) == ("/opt/prometheus", Path("/t"), Path("/jdk"))
    explicit = settings.Settings.from_env({"PULSARLAB_CACHE": "/c", "PULSARLAB_DOCKER_STATE": "/d", "DOCKER_HOST": "tcp://h:2375"})
    assert (explicit.cache_dir, explicit.docker_state, explicit.docker_host) == (Path("/c"), Path("/d"), "tcp://h:2375")


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan"])
def test_a_timeout_scale_that_is_no_positive_number_is_a_usage_error(value: str) -> None:
    with pytest.raises(UsageError, match="PULSARLAB_TIMEOUT_SCALE must be a number above 0"):
        settings.Settings.from_env({"PULSARLAB_TIMEOUT_SCALE": value}).check()


def test_the_modules_ask_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PULSARLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PULSARLAB_DOCKER_STATE", str(tmp_path / "docker"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "3")
    assert distribution.cache_root() == tmp_path / "cache"
    assert engine.default_host() == f"unix://{tmp_path}/docker/docker.sock"
    assert timeout("broker") == 3 * TIMEOUTS["broker"]


def test_the_cli_acts_on_the_state_dir_the_environment_names(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert runner.invoke(app, ["render", "--topology", "smoke", "--out", str(state)]).exit_code == 0
    (state / "state.json").write_text(json.dumps({"name": "smoke", "runtime": "local", "topology_ref": "smoke"}))
    result = runner.invoke(app, ["status", "--json"], env={"PULSARLAB_STATE_DIR": str(state)})
    assert json.loads(result.stdout)["state_dir"] == str(state)


def test_a_bad_setting_stops_the_cli_before_anything_starts(tmp_path: Path) -> None:
    result = runner.invoke(app, ["up", "--state-dir", str(tmp_path / "st")], env={"PULSARLAB_TIMEOUT_SCALE": "fast"})
    assert result.exit_code == 2 and result.stderr == "error: PULSARLAB_TIMEOUT_SCALE must be a number above 0 (got 'fast')\n"
    assert not (tmp_path / "st").exists()
