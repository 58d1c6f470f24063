"""The ``sync`` stretch cluster on the docker runtime: configured, placement proven as on the local
runtime, and a scenario (a recorded workload with a bookie's container killed) judged by the
verifier on it. Run under the cluster lock."""

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


def test_a_scenario_on_the_containers_loses_nothing_and_leaves_them_running(docker_sync: DockerCluster,
                                                                          tmp_path: Path) -> None:
    """kill-ensemble-bookie ``--on`` the docker deployment: a bookie of the topic's ensemble killed
    (its container), the recorded workload judged with RPO 0 and a short RTO, the bookie's
    container started again afterwards, and every ledger of the topic still with a copy in each
    region."""
    r = CliRunner().invoke(app, ["scenario", "run", "kill-ensemble-bookie", "--on", str(docker_sync.state_dir),
                                 "--json", "--out", str(tmp_path / "runs")])
    v = json.loads(r.stdout)
    assert r.exit_code == 0, json.dumps(v, indent=2)
    assert v["status"] == "pass" and v["rpo"] == 0 and v["checks"]["lost"] == 0
    [fault] = v["faults"]
    assert fault["fault"].startswith("kill ensemble:") and fault["outcome"] == "ok" and len(fault["nodes"]) == 1
    assert all(n.alive and n.ready for n in docker_sync.status())
    topic = json.loads((tmp_path / "runs" / "kill-ensemble-bookie" / "_run.json").read_text())["topic"]
    assert_placed_in_both_regions(docker_sync, topic)
