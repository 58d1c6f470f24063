"""The ``sync`` stretch cluster on the docker runtime: configured, placement proven as on the local
runtime, and a recorded workload judged clean by the verifier. Run under the cluster lock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsarlab import ops
from pulsarlab.runtime.docker.cluster import DockerCluster
from pulsarlab.verify import verify
from pulsarlab.workload.run import WorkloadConfig
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


def test_recorded_workload_verifies_clean(docker_sync: DockerCluster, tmp_path: Path) -> None:
    cfg = WorkloadConfig(f"persistent://mytenant/eu/docker-run-{uuid.uuid4().hex[:6]}", producers=1, consumers=1,
                         subscription_type="failover", rate=200, duration=8)
    result = ops.workload_run(docker_sync.state_dir, cfg, tmp_path / "run")
    assert result.failed == [] and result.counters.acked > 0, result
    verdict = verify(tmp_path / "run")
    assert verdict.status == "pass", verdict.counts()
