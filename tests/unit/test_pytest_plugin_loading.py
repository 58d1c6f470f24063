"""The pytest plugin stays out of the way: loading it twice does not clash, a run that does not ask
for ``pulsar_cluster`` starts nothing, and its lock and marker bookkeeping hold (no cluster needed)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from pulsarlab import pytest_plugin
from pulsarlab.pytest_plugin import MARKER_FILE, Settings, locked, read_marker, release

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def test_loaded_twice_and_unused_it_does_nothing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest('pytest_plugins = ["pulsarlab.pytest_plugin"]\n')
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "pulsarlab.pytest_plugin")
    result.assert_outcomes(passed=1)
    assert not (pytester.path / ".pulsarlab").exists(), "a run that never asked for pulsar_cluster created state"
    usage = pytester.runpytest_subprocess("-p", "pulsarlab.pytest_plugin", "--help")
    usage.stdout.fnmatch_lines(["*--pulsarlab-topology*", "*--pulsarlab-keep*"])


def test_its_entry_point_and_an_explicit_load_do_not_clash(pytester: pytest.Pytester, monkeypatch, tmp_path: Path) -> None:
    """The ``pytest11`` entry point as pyproject.toml declares it, on a path of its own (the
    installed pulsarlab may predate it), together with ``-p`` and a conftest's ``pytest_plugins``."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    info = tmp_path / "site" / "pulsarlab_entry_point-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pulsarlab-entry-point\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{tmp_path / 'site'}")
    pytester.makepyfile("def test_plain():\n    pass\n")
    pytester.runpytest_subprocess("--help").stdout.fnmatch_lines(["*--pulsarlab-topology*"])
    pytester.makeconftest('pytest_plugins = ["pulsarlab.pytest_plugin"]\n')
    pytester.runpytest_subprocess("-p", "pulsarlab.pytest_plugin").assert_outcomes(passed=1)


def test_a_bad_topology_fails_the_test_that_asks_not_the_run(pytester: pytest.Pytester, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makepyfile("def test_wants(pulsar_cluster):\n    pass\n\ndef test_other():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "pulsarlab.pytest_plugin", "--pulsarlab-topology", "no-such.yaml")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*pulsar_cluster: invalid topology: *no-such.yaml' is neither a built-in*"])
    assert "Traceback" not in result.stdout.str() and "raise TopologyError" not in result.stdout.str()


def settings(tmp_path: Path) -> Settings:
    return Settings("smoke", "local", tmp_path, keep=False)


def test_the_last_user_out_of_a_cluster_it_did_not_start_leaves_it(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the default pid_max: no such process
    (tmp_path / MARKER_FILE).write_text(json.dumps({"started": False, "users": [dead, os.getpid()]}))
    assert read_marker(tmp_path)["users"] == [os.getpid()], "a dead user must not keep the cluster up"
    assert release(settings(tmp_path), os.getpid()) is False
    assert not (tmp_path / MARKER_FILE).exists()


def test_a_user_still_in_keeps_the_cluster(tmp_path: Path) -> None:
    (tmp_path / MARKER_FILE).write_text(json.dumps({"started": True, "users": [os.getpid(), os.getppid()]}))
    assert release(settings(tmp_path), os.getpid()) is False
    assert read_marker(tmp_path) == {"started": True, "users": [os.getppid()]}


def test_the_lock_wait_is_bounded_and_says_what_it_waited_for(tmp_path: Path) -> None:
    with open(tmp_path / pytest_plugin.LOCK_FILE, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # another process bringing the cluster up
        with pytest.raises(TimeoutError, match="bringing the cluster up or down"), locked(tmp_path, timeout=0.6):
            pass
    with locked(tmp_path, timeout=0.6):
        pass
