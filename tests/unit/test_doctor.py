"""``pulsarlab doctor`` on this machine and on one that lacks things: each missing piece is named with what to do."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from pulsarlab.cli import app
from tests.topology_files import builtin_at

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def test_the_exit_code_follows_the_required_checks() -> None:
    result = runner.invoke(app, ["doctor", "--json"])
    checks = json.loads(result.stdout)
    assert [c["name"] for c in checks] == ["java", "javac", "maven", "distribution", "memory", "ports", "docker", "prometheus"]
    assert result.exit_code == (0 if all(c["ok"] for c in checks if c["required"]) else 1)
    assert all(c["fix"] for c in checks if not c["ok"]), "a missing piece without a word on what to do"


def test_a_machine_without_a_jdk_maven_or_the_distribution_is_told_what_to_install(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "DOCKER_HOST")}
    env.update(PATH=str(tmp_path / "empty-bin"), PULSARLAB_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "pulsarlab.cli", "doctor", "--json"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    for name in ("java", "javac", "maven", "distribution"):
        assert not checks[name]["ok"], name
    assert "openjdk-17-jdk" in checks["java"]["fix"] and "apt-get install maven" in checks["maven"]["fix"]
    assert "--distribution" in checks["distribution"]["fix"]
    assert not checks["docker"]["ok"] and not checks["docker"]["required"]


def test_a_port_in_use_is_named_with_its_node(tmp_path: Path) -> None:
    topo = builtin_at("smoke", "127.212", tmp_path)
    with socket.socket() as s:
        s.bind(("127.212.1.1", 2181))  # ZooKeeper's client port
        s.listen()
        result = runner.invoke(app, ["doctor", "--json", "--topology", str(topo)])
    ports = next(c for c in json.loads(result.stdout) if c["name"] == "ports")
    assert not ports["ok"] and "127.212.1.1:2181 (zk)" in ports["found"] and "pulsarlab down" in ports["fix"]
    assert result.exit_code == 1
