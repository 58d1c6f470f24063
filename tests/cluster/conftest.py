"""One real cluster at a time, shared by the tests that ask for its topology, always taken down."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from pulsarlab import ops
from pulsarlab.runtime.local import LocalCluster


class ClusterPool:
    """Keeps at most one running cluster; asking for another topology takes the current one down."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pulsarlab-tests-"))
        self.current: LocalCluster | None = None

    def get(self, topology: str) -> LocalCluster:
        if self.current is not None and self.current.topo.name == topology:
            return self.current
        self.close()
        _, cluster = ops.up(topology, state_dir=self.root / topology, say=print)
        self.current = cluster
        return cluster

    def close(self) -> None:
        if self.current is not None:
            cluster, self.current = self.current, None
            cluster.down()


@pytest.fixture(scope="session")
def cluster_pool():
    pool = ClusterPool()
    try:
        yield pool
    finally:
        pool.close()
        shutil.rmtree(pool.root, ignore_errors=True)


# module scope: a module's tests share one cluster; the pool switches topology between modules
@pytest.fixture(scope="module")
def smoke(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("smoke")


@pytest.fixture(scope="module")
def sync(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("sync")
