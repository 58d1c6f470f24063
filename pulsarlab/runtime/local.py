"""The local runtime: every node is a real Pulsar JVM on its own loopback address.

Order: ZooKeeper, then ``initialize-cluster-metadata`` per cluster, then bookies, then brokers;
nodes of one tier start together. Every process is recorded in the state directory by pid and
start time, and only those processes are ever signalled.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil
import requests
import yaml

from pulsarlab.errors import NodeStartError, PortInUseError, ProcessFailedError, StateError
from pulsarlab.render import NodeDirs, node_dirs, render
from pulsarlab.runtime.distribution import Distribution
from pulsarlab.runtime.distribution import resolve as resolve_distribution
from pulsarlab.runtime.state import ClusterState, ProcessRecord
from pulsarlab.runtime.waits import HttpOk, RegistrationGone, ZkServing, log_tail, wait_for
from pulsarlab.topology import Node, Role, Topology, parse

Say = Callable[[str], None]

TIMEOUT_SCALE = float(os.environ.get("PULSARLAB_TIMEOUT_SCALE", "1"))
TIMEOUTS = {"zookeeper": 60.0, "init": 180.0, "bookie": 120.0, "broker": 180.0, "e2e": 90.0, "stop": 30.0, "session": 75.0}
COMMAND = {Role.ZOOKEEPER: "zookeeper", Role.BOOKIE: "bookie", Role.BROKER: "broker"}
TIERS = (Role.ZOOKEEPER, Role.BOOKIE, Role.BROKER)


def timeout(kind: str) -> float:
    return TIMEOUTS[kind] * TIMEOUT_SCALE


@dataclass
class NodeStatus:
    name: str
    role: str
    cluster: str | None
    region: str
    address: str
    pid: int | None
    alive: bool
    paused: bool
    ready: bool


@dataclass
class UpResult:
    already_running: bool
    seconds: float
    started: list[str]


def _quiet(_msg: str) -> None:
    pass


class LocalCluster:
    """A topology run as local processes under ``state_dir``."""

    runtime = "local"

    def __init__(self, topo: Topology, state_dir: Path, dist: Distribution | None = None, say: Say = _quiet):
        self.topo = topo
        self.state_dir = state_dir.resolve()
        self.dist = dist
        self.say = say
        self._lock = threading.Lock()
        self.state = ClusterState.load(self.state_dir) or ClusterState(topo.name, self.runtime, topo.name)

    # ----- opening an existing cluster ---------------------------------------------------------
    @classmethod
    def open(cls, state_dir: Path, dist: Distribution | None = None, say: Say = _quiet) -> LocalCluster:
        """The cluster recorded in ``state_dir`` (as ``up`` left it)."""
        topo_file = state_dir / "topology.yaml"
        if not ClusterState.path(state_dir).is_file() or not topo_file.is_file():
            raise StateError(f"no pulsarlab cluster in {state_dir}: run 'pulsarlab up' first")
        topo = parse(yaml.safe_load(topo_file.read_text()))
        return cls(topo, state_dir, dist, say)

    # ----- paths and probes ----------------------------------------------------------------
    def dirs(self, node: Node) -> NodeDirs:
        return node_dirs(self.state_dir, node)

    def record(self, name: str) -> ProcessRecord | None:
        return self.state.nodes.get(name)

    def alive(self, name: str) -> bool:
        rec = self.record(name)
        return rec is not None and rec.alive()

    def readiness_probe(self, node: Node):
        addr = self.topo.address_of(node)
        if node.role == Role.ZOOKEEPER:
            return ZkServing(addr, node.port("client"))
        if node.role == Role.BOOKIE:
            return HttpOk(f"http://{addr}:{node.port('http')}/api/v1/bookie/is_ready", "bookie /api/v1/bookie/is_ready")
        return HttpOk(f"http://{addr}:{node.port('web')}/admin/v2/brokers/ready", "broker /admin/v2/brokers/ready")

    def wait_ready(self, node: Node) -> float:
        kind = node.role.value
        probe = self.readiness_probe(node)
        secs = wait_for(
            node.name, probe, what=probe.description, timeout=timeout(kind),
            log_file=self.dirs(node).log_file, alive=lambda: self.alive(node.name),
        )
        self.say(f"{node.name} ready ({secs:.1f}s)")
        return secs

    # ----- lifecycle -------------------------------------------------------------------------
    def check_ports(self, nodes: list[Node]) -> None:
        """Refuse before anything starts if an address/port a node needs is taken."""
        wanted = {n.name for n in nodes}
        for node, addr, port in self.topo.endpoints():
            if node.name not in wanted:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((addr, port))
                except OSError as exc:
                    if exc.errno == errno.EADDRINUSE:
                        raise PortInUseError(node.name, addr, port) from None
                    raise StateError(f"cannot bind {addr}:{port} for node {node.name}: {exc}") from None

    def distribution(self) -> Distribution:
        """The distribution the nodes run from: given, or the one this cluster was started with."""
        if self.dist is None:
            self.dist = resolve_distribution(self.state.distribution or None)
        return self.dist

    def _env(self, node: Node) -> dict[str, str]:
        self.distribution()
        j = self.topo.jvm
        dirs = self.dirs(node)
        heap, direct = {
            Role.ZOOKEEPER: (j.zookeeper_heap_mb, 64),
            Role.BOOKIE: (j.bookie_heap_mb, j.bookie_direct_mb),
            Role.BROKER: (j.broker_heap_mb, j.broker_direct_mb),
        }[node.role]
        mem = f"-Xms{min(heap, 64)}m -Xmx{heap}m -XX:MaxDirectMemorySize={direct}m"
        gc = "-XX:+UseSerialGC -XX:+PerfDisableSharedMem -XX:ReservedCodeCacheSize=64m"
        if j.fast_start:
            gc += " -XX:TieredStopAtLevel=1"
        extra = f"-Dpulsarlab.node={node.name} -Dpulsar.allocator.exit_on_oom=true -Dio.netty.recycler.maxCapacityPerThread=4096"
        if node.role == Role.BROKER:
            extra += f" -Djdk.net.hosts.file={self.local_hosts_file(node)}"
        env = dict(os.environ)
        env.update({
            "PULSAR_MEM": mem, "BOOKIE_MEM": mem, "PULSAR_GC": gc, "BOOKIE_GC": gc,
            "PULSAR_GC_LOG": " ", "BOOKIE_GC_LOG": " ",
            "PULSAR_EXTRA_OPTS": extra, "BOOKIE_EXTRA_OPTS": extra,
            "PULSAR_LOG_CONF": str(dirs.conf / "log4j2.yaml"), "PULSAR_LOG_DIR": str(dirs.logs),
            "PULSAR_LOG_APPENDER": "Console",
            "PULSAR_ZK_CONF": str(dirs.conf_file(Role.ZOOKEEPER)),
            "PULSAR_BOOKKEEPER_CONF": str(dirs.conf_file(Role.BOOKIE)),
            "PULSAR_BROKER_CONF": str(dirs.conf_file(Role.BROKER)),
        })
        if self.dist.java.home:
            env["JAVA_HOME"] = str(self.dist.java.home)
        return env

    def local_hosts_file(self, node: Node) -> Path:
        """A hosts file for one JVM in which this machine's name resolves to the node's own address.

        BookKeeper's placement policy finds the broker's own region from
        ``InetAddress.getLocalHost()``; on a shared machine that is the same for every node, so
        each broker gets its own view and the rack map can tell the brokers' regions apart.
        """
        return self.dirs(node).conf / "hosts"

    def write_local_hosts(self, node: Node) -> None:
        hostname = socket.gethostname()
        lines = [f"{self.topo.address_of(node)} {hostname}"]
        if hostname != "localhost":
            lines.append("127.0.0.1 localhost")
        path = self.local_hosts_file(node)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")

    def registration_id(self, node: Node) -> str | None:
        """The name a bookie or broker registers under in the metadata store."""
        addr = self.topo.address_of(node)
        if node.role == Role.BOOKIE:
            return f"{addr}:{node.port('bookie')}"
        if node.role == Role.BROKER:
            return f"{addr}:{node.port('web')}"
        return None

    def wait_registration_gone(self, node: Node) -> None:
        """A killed bookie or broker holds its registration until its session expires; a new
        process with the same id would fail to register (and hang), so wait that out first."""
        reg = self.registration_id(node)
        zks = [z for z in self.topo.nodes_of(Role.ZOOKEEPER) if self.alive(z.name)]
        if reg is None or not zks:
            return
        zk = zks[0]
        probe = RegistrationGone(self.topo.address_of(zk), zk.port("client"), reg)
        if not probe()[0]:
            self.say(f"{node.name}: waiting for its previous session to expire")
        wait_for(node.name, probe, what=probe.description, timeout=timeout("session"), interval=1.0)

    def spawn(self, node: Node) -> ProcessRecord:
        """Start one node's JVM in the background and record its pid."""
        self.distribution()
        self.wait_registration_gone(node)
        dirs = self.dirs(node)
        for d in (dirs.data, dirs.logs):
            d.mkdir(parents=True, exist_ok=True)
        if node.role == Role.BROKER:
            self.write_local_hosts(node)
        with open(dirs.log_file, "ab") as log:
            log.write(f"\n===== pulsarlab: starting {node.name} at {time.ctime()} =====\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [str(self.dist.bin_pulsar), COMMAND[node.role]], cwd=dirs.root, env=self._env(node),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        rec = ProcessRecord(proc.pid, psutil.Process(proc.pid).create_time())
        dirs.pid_file.write_text(f"{proc.pid}\n")
        with self._lock:
            self.state.nodes[node.name] = rec
            self.state.save(self.state_dir)
        self.say(f"{node.name} started (pid {proc.pid}, {self.topo.address_of(node)})")
        return rec

    def start_nodes(self, nodes: list[Node], seed: Callable[[LocalCluster], None] | None = None) -> None:
        """Start nodes tier by tier (ZooKeeper, bookies, brokers), each tier in parallel.

        On a cluster whose metadata was just created, one bookie per cluster starts first: bookies
        that start together on an empty cluster race to create the auto-recovery layout znode and
        the losers exit (``BadVersion for /ledgers/underreplication/LAYOUT``).
        With ``seed``, one broker per cluster starts first and ``seed`` runs against it before the
        other brokers start (so they find, for example, the rack map already written)."""
        for role in TIERS:
            tier = [n for n in nodes if n.role == role]
            if not tier:
                continue
            if role == Role.BOOKIE:
                fresh = self.initialize_metadata()
                first = self._first_per_cluster([n for n in tier if n.cluster in fresh])
                if first and len(first) < len(tier):
                    self._start_tier(first)
                    tier = [n for n in tier if n not in first]
            if role == Role.BROKER and seed is not None:
                first = self._first_per_cluster(tier)
                if len(first) < len(tier):
                    self._start_tier(first)
                    seed(self)
                    tier = [n for n in tier if n not in first]
            self._start_tier(tier)
            if role == Role.BOOKIE:
                for c in {n.cluster for n in tier}:
                    self.wait_writable_bookies(c)

    @staticmethod
    def _first_per_cluster(nodes: list[Node]) -> list[Node]:
        return [next(n for n in nodes if n.cluster == c) for c in dict.fromkeys(n.cluster for n in nodes)]

    def _start_tier(self, tier: list[Node]) -> None:
        for n in tier:
            self.spawn(n)
        with ThreadPoolExecutor(max_workers=len(tier)) as pool:
            for f in [pool.submit(self.wait_ready, n) for n in tier]:
                f.result()

    def initialize_metadata(self) -> set[str]:
        """Run ``initialize-cluster-metadata`` once per cluster (recorded in the state); return
        the clusters initialized now."""
        todo = [c for c in self.topo.clusters if c.name not in self.state.initialized]
        if not todo:
            return set()
        self.distribution()

        def init(cluster: str) -> None:
            log_path = self.state_dir / "logs" / f"init-{cluster}.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            zk = self.topo.nodes_of(Role.ZOOKEEPER)[0]
            env = self._env(zk)
            env["PULSAR_LOG_CONF"] = str(self.dirs(zk).conf / "log4j2.yaml")
            cmd = [
                str(self.dist.bin_pulsar), "initialize-cluster-metadata", "--cluster", cluster,
                "--metadata-store", self.topo.metadata_store_url(cluster),
                "--configuration-metadata-store", self.topo.configuration_store_url(),
                "--web-service-url", self.topo.web_url(cluster),
                "--broker-service-url", self.topo.service_url(cluster),
            ]
            with open(log_path, "wb") as log:
                try:
                    rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        timeout=timeout("init"), cwd=self.state_dir).returncode
                except subprocess.TimeoutExpired:
                    raise NodeStartError(f"init-{cluster}", "initialize-cluster-metadata to finish",
                                         timeout("init"), log_tail(log_path)) from None
            if rc != 0:
                raise ProcessFailedError(cmd, rc, log_tail(log_path, 40))
            self.say(f"cluster {cluster}: metadata initialized")

        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            for f in [pool.submit(init, c.name) for c in todo]:
                f.result()
        self.state.initialized = sorted({*self.state.initialized, *(c.name for c in todo)})
        self.state.save(self.state_dir)
        return {c.name for c in todo}

    def wait_writable_bookies(self, cluster: str) -> None:
        """Enough writable bookies for the cluster's ensemble are registered."""
        need = self.topo.cluster(cluster).persistence.ensemble
        bookies = [b for b in self.topo.nodes_of(Role.BOOKIE, cluster) if self.alive(b.name)]
        probe_node = bookies[0]
        addr = self.topo.address_of(probe_node)
        url = f"http://{addr}:{probe_node.port('http')}/api/v1/bookie/list_bookies?type=rw&print_hostnames=false"
        wait_for(
            cluster, HttpOk(url, accept=lambda r: len(r.json()) >= need),
            what=f"{need} writable bookies registered in cluster {cluster}", timeout=timeout("bookie"),
            log_file=self.dirs(probe_node).log_file,
        )

    def up(
        self, check: Callable[[LocalCluster], None] | None = None, seed: Callable[[LocalCluster], None] | None = None
    ) -> UpResult:
        """Bring every node up and ready; safe to re-run. ``check`` runs once all nodes are ready;
        ``seed`` once the first broker of each cluster is (see :meth:`start_nodes`)."""
        t0 = time.monotonic()
        previous = ClusterState.load(self.state_dir)
        if previous is not None:
            recorded = self.state_dir / "topology.yaml"
            same = recorded.is_file() and yaml.safe_load(recorded.read_text()) == self.topo.model_dump(mode="json")
            if not same and (previous.initialized or any(r.alive() for r in previous.nodes.values())):
                raise StateError(
                    f"{self.state_dir} holds a different {previous.name!r} cluster; "
                    "run 'pulsarlab down' first or choose another --state-dir"
                )
        missing = [n for n in self.topo.nodes if not self.alive(n.name)]
        if not missing:
            return UpResult(True, time.monotonic() - t0, [])
        # forget pids of processes that are gone (a crash, a reboot)
        for n in missing:
            self.state.nodes.pop(n.name, None)
        fresh = not self.state.initialized
        self.check_ports(missing)
        self.distribution()
        self.state.distribution, self.state.version = str(self.dist.home), self.dist.version
        render(self.topo, self.state_dir, self.dist.conf)
        self.state.save(self.state_dir)
        started = [n.name for n in missing]
        try:
            self.start_nodes(missing, seed)
            if check is not None:
                check(self)
        except BaseException:
            self.say("start failed: stopping the nodes this run started")
            for name in reversed(started):
                rec = self.record(name)
                if rec:
                    rec.kill()
                self.state.nodes.pop(name, None)
            if fresh:
                self.wipe_data()
                self.state.initialized = []
            self.state.save(self.state_dir)
            raise
        return UpResult(False, time.monotonic() - t0, started)

    def stop_node(self, name: str, kill: bool = False) -> None:
        node = self.topo.node(name)
        rec = self.record(node.name)
        if rec is None or not rec.alive():
            self.say(f"{name} is not running")
        elif kill:
            rec.kill()
            self.say(f"{name} killed (SIGKILL, pid {rec.pid})")
        else:
            rec.terminate(timeout("stop"))
            self.say(f"{name} stopped (pid {rec.pid})")
        self.state.nodes.pop(node.name, None)
        self.state.save(self.state_dir)

    def start_node(self, name: str) -> None:
        node = self.topo.node(name)
        if self.alive(name):
            self.say(f"{name} is already running")
            return
        self.check_ports([node])
        try:
            self.start_nodes([node])
        except BaseException:
            rec = self.state.nodes.pop(name, None)
            if rec:
                rec.kill()
            self.state.save(self.state_dir)
            raise

    def signal_node(self, name: str, sig: int) -> None:
        rec = self.record(self.topo.node(name).name)
        if rec is None or not rec.alive():
            raise StateError(f"node {name} is not running")
        rec.signal(sig)

    def down(self, keep_data: bool = False) -> list[str]:
        """Stop every node by pid (brokers, then bookies, then ZooKeeper); wipe data unless kept."""
        stopped = []
        for role in reversed(TIERS):
            recs = [(n.name, self.record(n.name)) for n in self.topo.nodes_of(role)]
            recs = [(name, r) for name, r in recs if r is not None and r.alive()]
            with ThreadPoolExecutor(max_workers=max(1, len(recs))) as pool:
                for f in [pool.submit(r.terminate, timeout("stop")) for _, r in recs]:
                    f.result()
            stopped += [name for name, _ in recs]
            for name, _ in recs:
                self.state.nodes.pop(name, None)
        left = [name for name, r in self.state.nodes.items() if r.alive()]
        if left:
            raise StateError(f"nodes still running after down: {', '.join(left)}")
        self.state.nodes = {}
        if keep_data:
            self.state.save(self.state_dir)
        else:
            self.wipe_data()
            ClusterState.path(self.state_dir).unlink(missing_ok=True)
        return stopped

    def wipe_data(self) -> None:
        """ZooKeeper and bookie data go together: a bookie's cookie must match the metadata."""
        for n in self.topo.nodes:
            shutil.rmtree(self.dirs(n).data, ignore_errors=True)

    # ----- status ----------------------------------------------------------------------------
    def status(self) -> list[NodeStatus]:
        def one(n: Node) -> NodeStatus:
            rec = self.record(n.name)
            alive = rec is not None and rec.alive()
            paused = alive and rec.paused()
            ready = alive and not paused and self.readiness_probe(n)()[0]
            return NodeStatus(n.name, n.role.value, n.cluster, n.region, self.topo.address_of(n),
                              rec.pid if alive else None, alive, paused, ready)

        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(one, self.topo.nodes))

    def admin_url(self, cluster: str) -> str:
        """The web URL of a broker of ``cluster`` that answers, for admin calls."""
        for b in self.topo.nodes_of(Role.BROKER, cluster):
            url = f"http://{self.topo.address_of(b)}:{b.port('web')}"
            if self.alive(b.name):
                try:
                    if requests.get(f"{url}/admin/v2/brokers/ready", timeout=3).ok:
                        return url
                except requests.RequestException:
                    continue
        raise StateError(f"no broker of cluster {cluster} is up")
