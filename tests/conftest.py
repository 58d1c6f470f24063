"""Shared test plumbing: the modules that share a deployment form one group, run one test after the
other on one cluster; the groups run longest first. With ``-n N`` (pytest-xdist; ``-n 3`` by
default) each worker has an address lane of its own and runs a group whole. Each tier's wall time (and each worker's busy time)
is printed at the end. One real cluster at a time per process, always taken down."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest

from pulsarlab import ops
from pulsarlab.runtime.local import LocalCluster
from tests.topology_files import builtin_at

TIERS = ("unit", "cluster", "docs", "scenarios")
# Cluster-tier modules that share one deployment (the pool's cluster, an engine-side deployment or
# image, module fixtures) and so must run on one worker; a module not named here is a group of its own.
# (the docs tier's test_docs reads the pool's smoke: it runs in the smoke group; the scenarios run
# --on the pool's sync, so they follow the sync group's modules on its worker instead of starting
# a sync of their own on another)
GROUPS = {
    "smoke": ("test_smoke", "test_env", "test_rerun", "test_smoke_lifecycle", "test_workload", "test_docs"),
    "sync": ("test_sync", "test_chaos", "test_builtin_scenarios"),
    "geo": ("test_geo", "test_monitoring"),
    "docker": ("test_docker_runtime", "test_docker_sync", "test_docker_image"),
}
GROUP_OF_MODULE = {m: g for g, modules in GROUPS.items() for m in modules}
# Rough seconds per group (a clean CI run's --durations, setup included): only the order in which
# the groups are handed out depends on it (longest first, so the last one to start is short). A
# group missing here counts as a minute; ungrouped tests (the unit tier) come last.
EXPECTED_S = {
    "test_ansible": 1000, "sync": 600, "test_compose_files": 300, "geo": 240, "smoke": 200, "docker": 200,
    "test_active_active": 150, "test_secure": 150, "test_secure_geo": 120, "test_pytest_plugin": 120,
    "test_upgrade": 190, "test_install": 90, "test_secure_own": 80, "test_terminal": 60, "test_spark_cluster": 150,
    "test_dropin": 60,
}
_spans: dict[str, list[float]] = {}
_counts: dict[str, int] = {}
_busy: dict[str, float] = {}
_module_s: dict[str, float] = {}  # setup + call + teardown seconds of each module's tests
_module_cpu: dict[str, float] = {}  # busy CPU seconds of the machine (all cores) meanwhile
CPU_PROPERTY = "pulsarlab_machine_cpu_s"


def _lane() -> None:
    """Worker gwN (N > 0) moves its clusters to its own address lane: the second octet of the
    base prefix (``PULSARLAB_TEST_ADDRESS_PREFIX``, default 127.0) plus 100 x N."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    n = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if n:
        first, second = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX", "127.0").split(".")
        lane = int(second) + 100 * n
        if lane > 255:
            raise pytest.UsageError(f"xdist worker {worker} has no address lane left above {first}.{second}: use fewer workers")
        os.environ["PULSARLAB_TEST_ADDRESS_PREFIX"] = f"{first}.{lane}"


_lane()
# two clusters share the cores when tests run on several workers: every wait of pulsarlab's gets
# twice its bound (a wait ends as soon as its condition holds, so a passing run is not slower)
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("PULSARLAB_TIMEOUT_SCALE", "2")
# the clusters the tests start are noted for `pulsarlab ls` in a folder of the run's own, not the
# user's (subprocesses and xdist workers inherit it); the process that made it removes it at its exit
if "PULSARLAB_KNOWN_CLUSTERS" not in os.environ:
    os.environ["PULSARLAB_KNOWN_CLUSTERS"] = _known = tempfile.mkdtemp(prefix="pulsarlab-known-")
    atexit.register(shutil.rmtree, _known, ignore_errors=True)


def tier_of_path(path: str) -> str:
    parts = Path(path).parts
    for t in TIERS:
        if t in parts:
            return t
    return "unit"


def tier_of(item: pytest.Item) -> str:
    return tier_of_path(str(item.fspath))


def group_of(nodeid: str) -> str | None:
    """The group a test runs in: its module's group in the cluster tier, else none (a test of its own)."""
    path = nodeid.split("::")[0]
    if tier_of_path(path) not in ("cluster", "docs", "scenarios"):  # docs and scenarios read the pool's clusters
        return None
    module = Path(path).stem
    return GROUP_OF_MODULE.get(module, module)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scope scheduling with our groups as the scopes, decided here from the test ids (the
    controller has no items to read marks from)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

        def _reschedule(self, node) -> None:
            # the next group goes to a worker once it holds only its current test (a worker keeps
            # one test back until it knows the next); xdist's own rule commits it two tests early
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if tier_of(item) == "cluster":
            item.add_marker(pytest.mark.cluster)
        elif tier_of(item) == "scenarios":
            item.add_marker(pytest.mark.scenario)

    # longest groups first, then the unit tier; order kept within each
    def key(item: pytest.Item) -> tuple[int, float]:
        group = group_of(item.nodeid)
        return (0, -EXPECTED_S.get(group, 60)) if group is not None else (1, 0)

    items.sort(key=key)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # runs where the results arrive (the xdist controller, or the one process without xdist)
    tier = tier_of_path(report.nodeid.split("::")[0])
    span = _spans.setdefault(tier, [report.start, report.stop])
    span[0], span[1] = min(span[0], report.start), max(span[1], report.stop)
    module = report.nodeid.split("::")[0]
    _module_s[module] = _module_s.get(module, 0.0) + report.duration
    # measured where the test ran (a worker's user_properties travel with its report)
    _module_cpu[module] = _module_cpu.get(module, 0.0) + sum(v for k, v in report.user_properties if k == CPU_PROPERTY)
    if report.when == "teardown":
        _counts[tier] = _counts.get(tier, 0) + 1
    node = getattr(report, "node", None)
    worker = getattr(getattr(node, "gateway", None), "id", "main")
    _busy[worker] = _busy.get(worker, 0.0) + report.duration


def _busy_cpu_s() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    # the machine's busy CPU seconds during each phase of each test (setup, call, teardown): on 2
    # cores the suite is CPU-bound, so this (not wall time) says what a change can save. With
    # several workers it counts what the others ran meanwhile too.
    outcome = yield
    now = _busy_cpu_s()
    before = getattr(item, "_pulsarlab_cpu_mark", None)
    item._pulsarlab_cpu_mark = now  # type: ignore[attr-defined]
    if before is None:  # setup: from the protocol's start
        before = getattr(item, "_pulsarlab_cpu_start", now)
    outcome.get_result().user_properties.append((CPU_PROPERTY, now - before))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    item._pulsarlab_cpu_start = _busy_cpu_s()  # type: ignore[attr-defined]
    yield


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    terminalreporter.section("wall time per tier")
    for t in TIERS:
        if t in _spans:
            a, b = _spans[t]
            terminalreporter.write_line(f"{t:9s} {_counts.get(t, 0):4d} tests  {b - a:7.1f} s  (first start to last end)")
        else:
            terminalreporter.write_line(f"{t:9s}    0 tests")
    if len(_busy) > 1:
        terminalreporter.write_line("busy time per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(_busy.items())))
    costly = sorted(((s, m) for m, s in _module_s.items() if tier_of_path(m) != "unit"), reverse=True)
    if costly:
        terminalreporter.write_line("costliest modules, wall (setup + tests + teardown) / machine CPU seconds: " + ", ".join(
            f"{Path(m).stem} {s:.0f}/{_module_cpu.get(m, 0.0):.0f}" for s, m in costly[:14]))


class ClusterPool:
    """Keeps at most one running cluster; asking for another topology takes the current one down."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pulsarlab-tests-"))
        self.current: LocalCluster | None = None
        self._security: dict | None = None  # the current cluster's security section (None: open)
        self._config: dict = {}  # the current cluster's top-level server settings (config, jvm_options)

    def get(self, topology: str, secure: bool = False, security: dict | None = None,
            config: dict | None = None, jvm_options: dict | None = None, namespaces: list | None = None) -> LocalCluster:
        """The running cluster of ``topology`` (with the secure profile if ``secure``: its defaults,
        or the ``security`` section given; with the top-level server settings ``config`` and
        ``jvm_options``, and ``namespaces`` instead of the built-in's); a node an earlier test left
        stopped is started again (``up`` is idempotent: a healthy cluster is only checked)."""
        cur = self.current
        want = (security or {}) if secure else None
        settings = {k: v for k, v in (("config", config), ("jvm_options", jvm_options), ("namespaces", namespaces)) if v}
        if cur is not None and (cur.topo.name != topology or self._security != want or self._config != settings):
            self.close()
        ref = topology
        prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")  # run beside another cluster
        fields = {**({"security": security} if security else {}), **settings}
        if prefix or fields:
            ref = str(builtin_at(topology, prefix or "127.0", self.root, **fields))
        state = self.root / (f"{topology}-secure" if secure else topology)
        result, self.current = ops.up(ref, state_dir=state, say=print, secure=secure)
        self._security, self._config = want, settings
        if not result.already_running:
            print(f"cluster pool: {topology}{' (secure)' if secure else ''} up in {result.seconds:.1f}s")
        return self.current

    def close(self) -> None:
        if self.current is not None:
            cluster, self.current = self.current, None
            cluster.down()


_pools: list[ClusterPool] = []  # the session's pool, for the hook below


@pytest.fixture(scope="session")
def cluster_pool():
    pool = ClusterPool()
    _pools.append(pool)
    try:
        yield pool
    finally:
        _pools.remove(pool)
        pool.close()
        shutil.rmtree(pool.root, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The pooled cluster goes down as soon as the tests move to a group that does not ask for it:
    an idle 9-node cluster keeps about a third of a core busy (its metadata stores poll every 5 ms),
    which the next group's own cluster, Spark job or unit tests would otherwise share the 2 cores with."""
    if not _pools or _pools[0].current is None:
        return
    def group(it: pytest.Item) -> str:
        return group_of(it.nodeid) or it.nodeid.split("::")[0]

    if nextitem is None or (group(nextitem) != group(item) and "cluster_pool" not in nextitem.fixturenames):
        _pools[0].close()


# module scope: a module's tests share one cluster; the pool switches topology between modules
@pytest.fixture(scope="module")
def smoke(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("smoke", config=SMOKE_CONFIG, jvm_options=SMOKE_JVM_OPTIONS)


# what client libraries' test brokers turn on; also the proof (test_smoke) that a topology's settings reach a broker
SMOKE_CONFIG = {"broker": {"acknowledgmentAtBatchIndexLevelEnabled": True}}
SMOKE_JVM_OPTIONS = {"broker": ["-Dpulsarlab.test.setting=from-topology"]}


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
    # the topology grants a role of its own consume only (test_secure: what a grant lets it do)
    return cluster_pool.get("smoke", secure=True, namespaces=[{"name": "smoke/test", "grants": {"auditor": ["consume"]}}])


@pytest.fixture(scope="module")
def secure_geo(cluster_pool: ClusterPool) -> LocalCluster:
    return cluster_pool.get("geo", secure=True, security={"token": "rsa"})  # RS256: the key-pair variant
