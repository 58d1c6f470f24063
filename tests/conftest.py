"""Shared test plumbing: tiers run in order (unit, cluster, scenario), each tier's wall time is printed,
and one real cluster at a time is shared by the tests that ask for its topology, always taken down."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from pulsarlab import ops
from pulsarlab.runtime.local import LocalCluster
from tests.topology_files import builtin_at

TIERS = ("unit", "cluster", "scenarios")
_spans: dict[str, list[float]] = {}
_counts: dict[str, int] = {}


def tier_of(item: pytest.Item) -> str:
    parts = Path(str(item.fspath)).parts
    for t in TIERS:
        if t in parts:
            return t
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # unit first; within the cluster tier, tests sharing a topology stay together
    def key(item: pytest.Item) -> tuple[int, int]:
        topo = next((i for i, name in enumerate(("smoke", "sync", "geo", "active_active")) if name in item.fixturenames), 9)
        return TIERS.index(tier_of(item)), topo

    items.sort(key=key)
    for item in items:
        if tier_of(item) == "cluster":
            item.add_marker(pytest.mark.cluster)
        elif tier_of(item) == "scenarios":
            item.add_marker(pytest.mark.scenario)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    tier = tier_of(item)
    start = time.monotonic()
    yield
    span = _spans.setdefault(tier, [start, start])
    span[1] = time.monotonic()
    _counts[tier] = _counts.get(tier, 0) + 1


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    terminalreporter.section("wall time per tier")
    for t in TIERS:
        if t in _spans:
            a, b = _spans[t]
            terminalreporter.write_line(f"{t:9s} {_counts[t]:4d} tests  {b - a:7.1f} s")
        else:
            terminalreporter.write_line(f"{t:9s}    0 tests")

class ClusterPool:
    """Keeps at most one running cluster; asking for another topology takes the current one down."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pulsarlab-tests-"))
        self.current: LocalCluster | None = None
        self._security: dict | None = None  # the current cluster's security section (None: open)

    def get(self, topology: str, secure: bool = False, security: dict | None = None) -> LocalCluster:
        """The running cluster of ``topology`` (with the secure profile if ``secure``: its defaults,
        or the ``security`` section given); a node an earlier test left stopped is started again
        (``up`` is idempotent: a healthy cluster is only checked)."""
        cur = self.current
        want = (security or {}) if secure else None
        if cur is not None and (cur.topo.name != topology or self._security != want):
            self.close()
        ref = topology
        prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")  # run beside another cluster
        if prefix or security:
            ref = str(builtin_at(topology, prefix or "127.0", self.root, **({"security": security} if security else {})))
        state = self.root / (f"{topology}-secure" if secure else topology)
        result, self.current = ops.up(ref, state_dir=state, say=print, secure=secure)
        self._security = want
        if not result.already_running:
            print(f"cluster pool: {topology}{' (secure)' if secure else ''} up in {result.seconds:.1f}s")
        return self.current

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


@pytest.fixture(scope="module")
def geo(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("geo")


@pytest.fixture(scope="module")
def active_active(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("active-active")


@pytest.fixture(scope="module")
def secure_smoke(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("smoke", secure=True)


@pytest.fixture(scope="module")
def secure_geo(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("geo", secure=True, security={"token": "rsa"})  # RS256: the key-pair variant
