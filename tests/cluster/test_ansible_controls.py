"""The controls on rehearsal hosts: a smoke cluster with one copy of each entry and no
deduplication (what ``control-no-redundancy`` and ``control-no-dedup`` need) put on five hosts by
``deploy.yml`` and attached by ``configure.yml``, then both controls run ``--on`` it over SSH. Each
passes only if the verifier finds the failure it provokes, so a fault that did not reach the hosts,
or a checker blind to it there, fails this test. The rest of the playbooks' proof is in
``test_ansible.py``; this lab is its own so the two run side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pulsarlab.topology import BUILTIN_DIR
from tests.cluster.ansible_deployed import every_node_serving
from tests.cluster.ansible_hosts import LabHosts, docker

pytestmark = pytest.mark.cluster
SYSTEMD = frozenset({"bk1", "bk2", "bk3"})  # the bookie whose disk is lost is stopped and wiped as a unit


@pytest.fixture(scope="module")
def lab(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LabHosts, Path]]:
    """Smoke on five hosts, shaped for both controls (a running deployment is not reconfigured by
    a scenario: the operator deploys what the control needs)."""
    root = tmp_path_factory.mktemp("controls")
    smoke = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    [cluster] = smoke["clusters"]
    cluster["skip_unrecoverable_data"] = True
    smoke["namespaces"] = [{"name": "smoke/test", "deduplication": False,
                            "persistence": {"ensemble": 1, "write_quorum": 1, "ack_quorum": 1}}]
    topology = root / "smoke-controls.yaml"
    topology.write_text(yaml.safe_dump(smoke))
    hosts = LabHosts(topology, root / "lab", docker_host, SYSTEMD)
    state = root / "state"
    try:
        hosts.start()
        inventory = root / "lab" / "inventory.yml"
        for book, extra in (("deploy.yml", ()), ("configure.yml", ("-e", f"pulsarlab_state_dir={state}"))):
            play = hosts.playbook(inventory, book, *extra)
            assert play.rc == 0, play.report(6000)
            print(f"{book}: smoke on 5 rehearsal hosts in {play.seconds:.1f}s")
        yield hosts, state
    finally:
        hosts.remove()


def test_both_controls_detect_their_failure_on_the_hosts(lab: tuple[LabHosts, Path], tmp_path: Path) -> None:
    """control-no-redundancy (the one copy's bookie killed on its host, its disk wiped there) is
    judged lost with RPO > 0; control-no-dedup (the owner's replies dropped by its host's packet
    filter, its clients disconnected) is judged duplicated in storage. Afterwards no rule of
    pulsarlab's is left on any host and every node runs again."""
    hosts, state = lab
    env = {**os.environ, "DOCKER_HOST": hosts.docker_host}
    run = subprocess.run([sys.executable, "-m", "pulsarlab.cli", "scenario", "run", "control-no-redundancy", "control-no-dedup",
                          "--on", str(state), "--json", "--out", str(tmp_path / "runs")],
                         capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    verdicts = {v["scenario"]: v for v in json.loads(run.stdout)["runs"]}
    for name, v in verdicts.items():
        assert (v["status"], v["control"]) == ("pass", True), v
        found = {k: n for k, n in v["checks"].items() if n}
        print(f"{name} on the hosts: checks {found}, RPO {v['rpo']}, {v['seconds']} s of run")

    lost = verdicts["control-no-redundancy"]
    assert lost["checks"]["lost"] > 0 and lost["rpo"] > 0, lost
    kill, _, wipe = lost["faults"]
    assert kill["outcome"] == wipe["outcome"] == "ok" and kill["nodes"] == wipe["nodes"], lost["faults"]
    assert kill["ts"] <= kill["effect_ts"] <= kill["ended_ts"], kill  # the kill's time, read on its host
    dup = verdicts["control-no-dedup"]
    assert dup["checks"]["duplicated_in_storage"] > 0 and dup["checks"]["lost"] == 0, dup
    assert [f["action"] for f in dup["faults"]] == ["mute", "disconnect", "heal"], dup["faults"]

    for node in hosts.topo.nodes:
        rules = docker(hosts.docker_host, "exec", hosts.name(node.name), "iptables", "-S").stdout
        assert "pulsarlab:" not in rules, (node.name, rules)
    every_node_serving(state, env)
