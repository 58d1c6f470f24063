"""``eval "$(pulsarlab env)"`` points the distribution's own tools at the running cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pulsarlab import distribution
from pulsarlab.runtime.local import LocalCluster

ROOT = Path(__file__).resolve().parents[2]


def test_pulsar_admin_works_after_eval_env(smoke: LocalCluster) -> None:
    dist = distribution.resolve()
    env = dict(os.environ, PULSAR_HOME=str(dist.home), PYTHONPATH=str(ROOT))
    env.pop("PULSAR_CLIENT_CONF", None)
    if dist.java.home:
        env["JAVA_HOME"] = str(dist.java.home)
    script = (f'eval "$({sys.executable} -m pulsarlab.cli env --state-dir {smoke.state_dir})" && '
              'echo "conf=$PULSAR_CLIENT_CONF" && "$PULSAR_HOME/bin/pulsar-admin" tenants list')
    proc = subprocess.run(["bash", "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"conf={smoke.state_dir / 'client.conf'}"
    assert {"public", "pulsar"} <= set(lines[1:]), proc.stdout
