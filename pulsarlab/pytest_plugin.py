"""A pytest plugin: the ``pulsar_cluster`` fixture gives a test session a real Pulsar cluster.

Loaded through the ``pytest11`` entry point (or ``-p pulsarlab.pytest_plugin``). It does nothing
unless a test asks for ``pulsar_cluster``: then it brings the topology up once per run with
:func:`pulsarlab.ops.up` (reusing one already up in the state directory) and takes it down at the end
if this run started it, unless ``--pulsarlab-keep``. With ``--pulsarlab-secure`` the cluster runs the
secure profile (token authentication, TLS only) and ``pulsar_cluster.client()`` connects with the
admin token and the cluster's CA; ``pulsar_cluster.auth`` gives the same to other clients.

Under pytest-xdist every worker asks for the same state directory; a file lock there makes one of
them start the cluster and the others reuse it, and a marker file lists the processes using it.
Workers never take it down (one may finish before another has joined); the controller does at the
end of the run. Without xdist the last process out does (several runs may share a state directory).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pulsar
import pytest

if TYPE_CHECKING:
    from pulsarlab.security import ClientAuth

LOCK_FILE = "pytest.lock"
MARKER_FILE = "pytest-users.json"
LOCK_TIMEOUT = 900.0  # a cold start (distribution download included) fits well inside
log = logging.getLogger("pulsarlab.pytest")


@dataclass(frozen=True)
class ClusterURLs:
    """Where one Pulsar cluster of the topology answers."""

    service_url: str
    admin_url: str


@dataclass
class PulsarCluster:
    """What ``pulsar_cluster`` hands a test: the URLs and a client factory."""

    name: str
    state_dir: Path
    clusters: dict[str, ClusterURLs]
    namespaces: dict[str, str]  # per cluster: the topology's first namespace on it
    pulsar_version: str = ""  # the Pulsar release the deployment runs
    auth: ClientAuth | None = None  # secure clusters: the admin token file and the CA (headers(), verify)
    _clients: list[pulsar.Client] = field(default_factory=list, repr=False)

    @property
    def service_url(self) -> str:
        return next(iter(self.clusters.values())).service_url

    @property
    def admin_url(self) -> str:
        return next(iter(self.clusters.values())).admin_url

    def topic(self, name: str, cluster: str | None = None) -> str:
        """``persistent://<namespace>/<name>`` in a namespace the topology serves on that cluster."""
        return f"persistent://{self.namespaces[cluster or next(iter(self.clusters))]}/{name}"

    def client(self, cluster: str | None = None, **kwargs) -> pulsar.Client:
        """A ``pulsar.Client`` connected to ``cluster`` (default: the first); closed at session end."""
        url = self.clusters[cluster].service_url if cluster else self.service_url
        kwargs.setdefault("operation_timeout_seconds", 30)
        kwargs.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
        if self.auth is not None:
            kwargs = {**self.auth.pulsar_client_kwargs(), **kwargs}
        c = pulsar.Client(url, **kwargs)
        self._clients.append(c)
        return c

    def close_clients(self) -> None:
        for c in self._clients:
            with contextlib.suppress(Exception):
                c.close()
        self._clients.clear()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pulsarlab", "real Pulsar clusters (the pulsar_cluster fixture)")
    group.addoption("--pulsarlab-topology", default="smoke", help="built-in topology (smoke, sync, ...) or a YAML file")
    group.addoption("--pulsarlab-runtime", default="local", help="runtime that runs the nodes (default: local)")
    group.addoption("--pulsarlab-state-dir", default=None,
                    help="state directory (default: <rootdir>/.pulsarlab/<topology name>); a cluster up there is reused")
    group.addoption("--pulsarlab-keep", action="store_true", default=False, help="leave the cluster running at the end")
    group.addoption("--pulsarlab-secure", action="store_true", default=False,
                    help="the secure profile: token authentication, authorization and TLS only")
    group.addoption("--pulsarlab-pulsar-version", default=None, metavar="V",
                    help="the Pulsar release to run, e.g. 4.0.6 (default: the topology's, else pulsarlab's); "
                         "a cluster up in the state directory on another release is an error, not reused")


@dataclass(frozen=True)
class Settings:
    topology: str
    runtime: str
    state_dir: Path
    keep: bool
    secure: bool = False
    pulsar_version: str | None = None

    @classmethod
    def of(cls, config: pytest.Config) -> Settings:
        from pulsarlab.topology import BUILTINS, load

        topology = config.getoption("pulsarlab_topology")
        if topology not in BUILTINS:
            topology = str(Path(topology).resolve())
        given = config.getoption("pulsarlab_state_dir")
        state_dir = Path(given) if given else config.rootpath / ".pulsarlab" / load(topology).name
        return cls(topology, config.getoption("pulsarlab_runtime"), state_dir.resolve(), config.getoption("pulsarlab_keep"),
                   config.getoption("pulsarlab_secure"), config.getoption("pulsarlab_pulsar_version"))


@contextlib.contextmanager
def locked(state_dir: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the state directory's plugin lock (bounded wait: another process may be starting the cluster)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / LOCK_FILE, "a") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"waited {timeout:.0f}s for {state_dir / LOCK_FILE} (another test process "
                                       "is bringing the cluster up or down)") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_marker(state_dir: Path) -> dict:
    """``{"started": bool, "users": [pid, ...]}``, with the pids of dead processes dropped."""
    path = state_dir / MARKER_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"started": False, "users": []}
    data["users"] = [p for p in data.get("users", []) if psutil.pid_exists(p)]
    return data


def write_marker(state_dir: Path, data: dict) -> None:
    (state_dir / MARKER_FILE).write_text(json.dumps(data))


def acquire(settings: Settings) -> PulsarCluster:
    """Bring the cluster up (or join the one up) and count this process among its users."""
    from pulsarlab import ops, urls
    from pulsarlab.errors import UsageError
    from pulsarlab.topology import cluster_namespace

    with locked(settings.state_dir):
        marker = read_marker(settings.state_dir)
        marker["users"].append(os.getpid())
        write_marker(settings.state_dir, marker)
        try:
            result, cluster = ops.up(settings.topology, settings.runtime, settings.state_dir, say=log.info,
                                     secure=settings.secure, pulsar_version=settings.pulsar_version)
            running = cluster.pulsar_version()
            if result.already_running and settings.pulsar_version and running != settings.pulsar_version:
                raise UsageError(f"the cluster up in {settings.state_dir} runs Pulsar {running}, not "
                                 f"{settings.pulsar_version} (--pulsarlab-pulsar-version): take it down "
                                 f"('pulsarlab down --state-dir {settings.state_dir}') or give another --pulsarlab-state-dir")
        except BaseException:
            marker["users"].remove(os.getpid())
            write_marker(settings.state_dir, marker)  # ``up`` stopped whatever it had started
            raise
        if not result.already_running:
            marker["started"] = True
            write_marker(settings.state_dir, marker)
    topo = cluster.topo
    return PulsarCluster(
        topo.name, settings.state_dir,
        {c.name: ClusterURLs(topo.service_url(c.name), urls.admin_url(cluster, c.name)) for c in topo.clusters},
        {c.name: cluster_namespace(topo, c.name) for c in topo.clusters},
        cluster.pulsar_version(),
        cluster.client_auth(),
    )


def release(settings: Settings, pid: int | None = None, may_stop: bool = True) -> bool:
    """Count this process (or, from the xdist controller, nobody) out; the last one out takes down a
    cluster the plugin started, if ``may_stop``. Returns whether it was taken down."""
    from pulsarlab import ops

    if not (settings.state_dir / MARKER_FILE).is_file():
        return False
    with locked(settings.state_dir):
        marker = read_marker(settings.state_dir)
        if pid in marker["users"]:
            marker["users"].remove(pid)
        if marker["users"] or not may_stop:
            write_marker(settings.state_dir, marker)
            return False
        (settings.state_dir / MARKER_FILE).unlink(missing_ok=True)
        if not marker.get("started") or settings.keep:
            return False
        return ops.down(settings.state_dir, say=log.info) is not None  # None: someone ran `pulsarlab down`


def terminate_as_interrupt():
    """Let SIGTERM (a CI job cancelled) unwind like Ctrl-C, so the cluster is taken down; returns
    the handler to restore, or None when another one is installed or this is not the main thread."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return None

    def interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    return signal.signal(signal.SIGTERM, interrupt)


@pytest.fixture(scope="session")
def pulsar_cluster(request: pytest.FixtureRequest) -> Iterator[PulsarCluster]:
    """A real Pulsar cluster for the whole run (one per run, also under pytest-xdist)."""
    from pulsarlab.errors import PulsarlabError

    try:
        settings = Settings.of(request.config)
        cluster = acquire(settings)
    except PulsarlabError as exc:  # what to fix, without pulsarlab's own stack
        pytest.fail(f"pulsar_cluster: {exc}", pytrace=False)
    previous = terminate_as_interrupt()
    try:
        yield cluster
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        cluster.close_clients()
        # an xdist worker never stops it: another worker may not have joined yet; the controller
        # stops it once every worker is done
        release(settings, os.getpid(), may_stop=not hasattr(request.config, "workerinput"))


def pytest_unconfigure(config: pytest.Config) -> None:
    """On the xdist controller, once every worker is done: take down the cluster they used."""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("dsession"):
        return
    with contextlib.suppress(Exception):
        release(Settings.of(config))
