"""pulsarlab as a user gets it: a wheel installed into a fresh venv, run by path, not activated.

Slow (a wheel, a venv, its dependencies from uv's cache), so one venv serves every test here. The
commands run from a temp folder with a PATH that holds neither the venv's bin nor a ``python3`` that
has the project's dependencies, so nothing of the checkout or of the test's interpreter can help.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pulsarlab.verify import VERDICT_FILE
from tests.cluster.handmade import handmade_history

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 900  # s; dependencies come from uv's cache, PyPI only when it misses
VERIFY_TIMEOUT = 300


@dataclass(frozen=True)
class Installed:
    venv: Path
    env: dict[str, str]
    cwd: Path

    def run(self, *args: str, timeout: float = VERIFY_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """``<venv>/bin/pulsarlab ARGS``, by path, the way a user with a non-activated venv runs it."""
        return subprocess.run([str(self.venv / "bin" / "pulsarlab"), *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


def _step(what: str, cmd: list[str], **kw) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, **kw)
    assert done.returncode == 0, f"{what} failed ({' '.join(cmd)}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    print(f"{what}: {time.monotonic() - started:.1f} s")


def _has_pyarrow(python: Path) -> bool:
    try:
        return subprocess.run([str(python), "-c", "import pyarrow"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def user_env(venv: Path) -> dict[str, str]:
    """The caller's environment without the venv on PATH, nothing pointing Python or Spark elsewhere,
    and no PATH entry whose ``python3`` could stand in for the venv's interpreter."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"}}
    keep = [d for d in env.get("PATH", "").split(os.pathsep)
            if d and Path(d).resolve() != (venv / "bin").resolve() and not _has_pyarrow(Path(d) / "python3")]
    env["PATH"] = os.pathsep.join(keep)
    java = shutil.which("java")
    if "JAVA_HOME" not in env and java:  # Spark finds java through JAVA_HOME or PATH; keep it findable
        env["JAVA_HOME"] = str(Path(os.path.realpath(java)).parent.parent)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("install")
    # Build from a copy: an in-tree build would leave build/ behind, whose stale files end up in later wheels.
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    # the node role's files ship in the wheel too (pulsarlab.node_files: the upgrade's order and gates)
    for folder in ("pulsarlab", "templates", "playbooks/roles/pulsar_node/files"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    _step("wheel", [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(src)])
    (wheel,) = (root / "dist").glob("pulsarlab-*.whl")
    venv = root / "venv"
    _step("venv", [sys.executable, "-m", "venv", str(venv)])
    # uv, as .ci/run installs (its cache holds the dependencies by then; pip's is empty on a fresh
    # machine, and pyspark comes as a source archive it would build again); like pip --no-compile,
    # Python compiles what it imports on first use
    _step("install", [sys.executable, "-m", "uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"), str(wheel)])
    cwd = root / "cwd"
    cwd.mkdir()
    yield Installed(venv, user_env(venv), cwd)


def test_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    where = subprocess.run([str(installed.venv / "bin" / "python"), "-c", "import pulsarlab; print(pulsarlab.__file__)"],
                           cwd=installed.cwd, env=installed.env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.venv), where.stdout
    assert not _has_pyarrow(Path(shutil.which("python3", path=installed.env["PATH"]) or "/nonexistent")), (
        "the PATH of these tests must not offer a python3 with the project's dependencies")


def test_verify_runs_from_the_installed_wheel(installed: Installed, tmp_path: Path) -> None:
    clean = handmade_history(tmp_path / "clean")
    done = installed.run("verify", "--json", "--driver-memory", "1g", str(clean))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert done.stderr == "", done.stderr  # Spark's and log4j's lines go to spark.log, not to the user
    assert json.loads(done.stdout)["ok"] is True and (clean / "spark.log").is_file()
    verdict = json.loads((clean / VERDICT_FILE).read_text())
    assert verdict["ok"] is True
    assert {c["name"]: c["count"] for c in verdict["checks"] if c["count"]} == {}
    assert verdict["metrics"]["messages"]["acknowledged"] == 40

    lossy = handmade_history(tmp_path / "lossy", lose=11)
    done = installed.run("verify", "--driver-memory", "1g", str(lossy))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-5000:]
    counts = {c["name"]: c["count"] for c in json.loads((lossy / VERDICT_FILE).read_text())["checks"]}
    assert counts["lost"] == 1
    # the table a person reads from a pipe: names whole, instants as UTC times; on stderr only the reason
    assert "longest_gap_without_ack_s.from_ts" in done.stdout and "2027-01-15T08:00:0" in done.stdout
    assert "lost, first example: " in done.stdout and done.stderr == "failed: forbidden checks counted: lost=1\n", done.stderr


def test_down_with_nothing_up_exits_0_from_the_installed_wheel(installed: Installed) -> None:
    done = installed.run("down", timeout=120)
    assert done.returncode == 0 and "nothing to stop" in done.stdout, done.stdout + done.stderr


def test_render_uses_the_templates_shipped_in_the_wheel(installed: Installed) -> None:
    out = installed.cwd / "rendered"
    done = installed.run("render", "--topology", "sync", "--out", str(out), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    broker = out / "nodes" / "pulsar1-eu" / "conf" / "broker.conf"
    assert "clusterName=" in broker.read_text()
    for node in ("zk", "bk1-eu", "bk2-us", "pulsar2-us"):
        assert any((out / "nodes" / node / "conf").glob("*.conf")), node
