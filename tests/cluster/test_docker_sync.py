"""The ``sync`` stretch cluster on the docker runtime: configured, placement proven as on the local
runtime, and two scenarios (a recorded workload with a bookie's container killed, then with the
eu region's containers killed) judged by the verifier on it. Run under the cluster lock."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab import ops
from pulsarlab.cli import app
from pulsarlab.runtime.docker.cluster import DockerCluster
from tests.cluster.conftest import docker_deployment
from tests.cluster.test_sync import _produce, assert_placed_in_both_regions
from tests.scenario_files import builtin, scaled_builtin


@pytest.fixture(scope="module")
def docker_sync(docker_host: str, cluster_pool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    with docker_deployment("sync", docker_host, cluster_pool, tmp_path_factory.mktemp("docker")) as cluster:
        yield cluster
    assert cluster.project_containers() == [] and cluster.project_volumes() == []


def test_configured_placement_puts_a_copy_in_each_region(docker_sync: DockerCluster) -> None:
    assert ops.configure(docker_sync.state_dir, dry_run=True).changes == []  # up left it configured
    topic = f"persistent://mytenant/eu/docker-placement-{uuid.uuid4().hex[:8]}"
    _produce(docker_sync, [f"p-{i}".encode() for i in range(200)], topic)
    assert_placed_in_both_regions(docker_sync, topic)


def test_scenarios_on_the_containers_lose_nothing_and_leave_them_running(docker_sync: DockerCluster,
                                                                         tmp_path: Path) -> None:
    """kill-ensemble-bookie and sync-region-loss ``--on`` the docker deployment: a bookie of the
    topic's ensemble killed (its container), then every eu container killed and the topic taken over
    in us; each recorded workload judged with RPO 0 and a measured recovery, every container started
    again afterwards, and every ledger of the bookie loss's topic still with a copy in each region."""
    names = ("kill-ensemble-bookie", "sync-region-loss")
    region_loss = builtin("sync-region-loss")
    region_loss["workload"]["duration"] = 30  # not 60: the run goes on until the topic is acknowledged again anyway
    specs = [str(scaled_builtin(name, tmp_path / "spec", region_loss if name == "sync-region-loss" else None))
             for name in names]
    r = CliRunner().invoke(app, ["scenario", "run", *specs, "--on", str(docker_sync.state_dir),
                                 "--json", "--out", str(tmp_path / "runs")])
    runs = {v["scenario"]: v for v in json.loads(r.stdout)["runs"]}
    assert r.exit_code == 0, json.dumps(runs, indent=2)
    for name in names:
        v = runs[name]
        assert v["status"] == "pass" and v["rpo"] == 0 and v["checks"]["lost"] == 0, v
        print(f"{name} on docker: max recovery {v['rto']['max_recovery_s']} s, {v['seconds']:.0f} s of run")
    [fault] = runs["kill-ensemble-bookie"]["faults"]
    assert fault["fault"].startswith("kill ensemble:") and fault["outcome"] == "ok" and len(fault["nodes"]) == 1
    [loss] = runs["sync-region-loss"]["faults"]
    assert sorted(loss["nodes"]) == ["bk1-eu", "bk2-eu", "pulsar1-eu", "pulsar2-eu"] and loss["outcome"] == "ok", loss
    assert runs["sync-region-loss"]["rto"]["max_recovery_s"] > 1  # an outage happened (its end: the scenario's bound)
    assert all(n.alive and n.ready for n in docker_sync.status())
    topic = json.loads((tmp_path / "runs" / "kill-ensemble-bookie" / "_run.json").read_text())["topic"]
    assert_placed_in_both_regions(docker_sync, topic)
