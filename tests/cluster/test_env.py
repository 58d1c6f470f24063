"""``eval "$(pulsarlab env)"`` points the distribution's own tools at the running cluster, and
``pulsarlab logs`` shows what its nodes write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import requests
from typer.testing import CliRunner

from pulsarlab import distribution
from pulsarlab.admin.client import encode_topic
from pulsarlab.cli import app
from pulsarlab.ops import default_topic
from pulsarlab.runtime.local import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def after_eval_env(cluster: LocalCluster, commands: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``commands`` in bash after ``eval "$(pulsarlab env)"`` (with PULSAR_HOME set to the distribution)."""
    dist = distribution.resolve()
    env = dict(os.environ, PULSAR_HOME=str(dist.home), PYTHONPATH=str(ROOT))
    env.pop("PULSAR_CLIENT_CONF", None)
    if dist.java.home:
        env["JAVA_HOME"] = str(dist.java.home)
    script = f'eval "$({sys.executable} -m pulsarlab.cli env --state-dir {cluster.state_dir})" && {commands}'
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_pulsar_admin_works_after_eval_env(smoke: LocalCluster) -> None:
    proc = after_eval_env(smoke, 'echo "conf=$PULSAR_CLIENT_CONF" && "$PULSAR_HOME/bin/pulsar-admin" tenants list')
    lines = proc.stdout.splitlines()
    assert lines[0] == f"conf={smoke.state_dir / 'client.conf'}"
    assert {"public", "pulsar"} <= set(lines[1:]), proc.stdout


def test_pulsar_perf_produces_after_eval_env(smoke: LocalCluster) -> None:
    topic = default_topic(smoke, "smoke", "perf-env")
    # a durable subscription first: a topic with none is deleted by its broker's inactive-topic sweep
    # after a minute idle, and on a loaded machine the second JVM below can start later than that
    kept = requests.put(f"{smoke.admin_url('smoke')}/admin/v2/{encode_topic(topic)}/subscription/kept", timeout=30)
    assert kept.status_code in (204, 409), kept.text
    after_eval_env(smoke, f'"$PULSAR_HOME/bin/pulsar-perf" produce -r 50 -m 50 {topic} >/dev/null', timeout=180)
    stats = after_eval_env(smoke, f'"$PULSAR_HOME/bin/pulsar-admin" topics stats {topic}')
    assert json.loads(stats.stdout)["msgInCounter"] >= 50  # pulsar-perf may send one more than -m


def test_logs_of_a_running_node_and_of_all(smoke: LocalCluster) -> None:
    state = ["--state-dir", str(smoke.state_dir)]
    one = runner.invoke(app, ["logs", "pulsar1", "--lines", "5", *state])
    assert one.exit_code == 0, one.output
    assert len(one.stdout.splitlines()) == 5
    every = runner.invoke(app, ["logs", "--all", "--since", "3600", *state])
    assert every.exit_code == 0, every.output
    assert {line.split(" | ")[0] for line in every.stdout.splitlines()} == {n.name for n in smoke.topo.nodes}
