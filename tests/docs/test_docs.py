"""The docs tier: the commands README.md and docs/ show that can run against a smoke cluster run as
written, through the installed ``pulsarlab`` command, from another folder, with the cluster found
as ``pulsarlab env`` says (PULSARLAB_STATE_DIR); each exits 0 and prints what the docs promise (one
JSON document for ``--json``, the folder ``--out`` names). Which commands run and why the others
do not is decided in ``tests/docs_commands.py``; the unit tier checks that every documented
command is in one list or the other and parses against the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pulsarlab.runtime.local import LocalCluster
from pulsarlab.topology import BUILTIN_DIR
from tests.docs_commands import RUN_ON_SMOKE, documented_commands

pytestmark = [pytest.mark.cluster, pytest.mark.docs]
PULSARLAB = Path(sys.executable).with_name("pulsarlab")  # what `pip install -e .` put beside this Python
WHERE = {c.text: c.where for c in documented_commands()}


def hosts_file(path: Path) -> None:
    """A hosts file as docs/ansible.md describes it: sync's nodes, each on a machine's address."""
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    regions = {r: i for i, r in enumerate(data["regions"], 1)}
    seen: dict[str, int] = {}
    for node in data["nodes"]:
        seen[node["region"]] = seen.get(node["region"], 0) + 1
        node["address"] = f"10.0.{regions[node['region']]}.{10 + seen[node['region']]}"
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The user's folder: the files the docs' commands name."""
    (tmp_path / "my-topology.yaml").write_text((BUILTIN_DIR / "smoke.yaml").read_text())
    hosts_file(tmp_path / "hosts.yaml")
    hosts_file(tmp_path / "my-hosts.yaml")
    return tmp_path


@pytest.mark.parametrize("command", sorted(RUN_ON_SMOKE))
def test_a_documented_command_runs_as_written(smoke: LocalCluster, folder: Path, command: str) -> None:
    assert PULSARLAB.is_file(), f"{PULSARLAB}: the README's install puts the pulsarlab command there"
    argv = [str(PULSARLAB), *command.split()[1:]]
    argv = [str(folder / "out") if a == "DIR" else a for a in argv]
    env = {k: v for k, v in os.environ.items() if k not in ("PULSARLAB_STATE_DIR", "COLUMNS")}
    env["PULSARLAB_STATE_DIR"] = str(smoke.state_dir)
    proc = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    said = f"{WHERE[command]}: {command}\nexit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and proc.stdout.strip(), said
    if "--json" in argv:
        json.loads(proc.stdout)  # one document, nothing before or after it
    if "--out" in argv:
        out = folder / argv[argv.index("--out") + 1]
        assert out.is_dir() and any(out.iterdir()), said
    shown = SHOWN.get(command)
    if shown is not None:
        assert shown(proc.stdout, smoke), said


def _status(stdout: str, smoke: LocalCluster) -> bool:
    nodes = json.loads(stdout)["nodes"]
    return {n["name"] for n in nodes} == {n.name for n in smoke.topo.nodes} and all(n["ready"] for n in nodes)


# what a command's output must show beyond "exit 0 and something printed"
SHOWN = {
    "pulsarlab status --json": _status,
    "pulsarlab status": lambda out, c: all(n.name in out for n in c.topo.nodes),
    "pulsarlab ls": lambda out, c: str(c.state_dir) in out,
    "pulsarlab env": lambda out, c: "export PULSAR_SERVICE_URL=" in out and "export PULSARLAB_STATE_DIR=" in out,
    "pulsarlab topologies": lambda out, c: all(t in out for t in ("smoke", "sync", "geo", "active-active")),
    "pulsarlab scenario list": lambda out, c: "sync-region-loss" in out and "rolling-upgrade" in out,
    "pulsarlab inspect bookies": lambda out, c: all(n.name in out for n in c.topo.nodes if n.role.value == "bookie"),
    "pulsarlab render --topology my-topology.yaml --explain pulsar1": lambda out, c: "brokerServicePort" in out,
}
