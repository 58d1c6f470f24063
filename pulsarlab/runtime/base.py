"""What every runtime that controls its nodes shares: start order, readiness waits, and the
bookkeeping of up, down and node control.

Order: ZooKeeper with ``initialize-cluster-metadata`` per cluster, then the brokers with the
bookies (see :meth:`NodeRuntime.start_nodes`). A runtime subclass provides the primitives (how one node is
started, stopped, paused, observed, and where its log is); everything else is written once here.
Every node listens on its own address of this machine, so readiness is probed the same way on
every runtime. Endpoints, credentials and status come from
:class:`~pulsarlab.runtime.endpoints.RecordedDeployment`, which an attached cluster shares too.
"""

from __future__ import annotations

import abc
import errno
import functools
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import psutil
import yaml

from pulsarlab.admin.commands import rack_document
from pulsarlab.admin.placement import bookie_get
from pulsarlab.admin.racks import write_rack_maps
from pulsarlab.classdata import RECORD_FLAGS
from pulsarlab.deployment import NodeControl, UpResult
from pulsarlab.distribution import Distribution, resolve
from pulsarlab.errors import NodeStartError, PortInUseError, ProcessFailedError, StateError
from pulsarlab.render import NodeDirs, node_dirs
from pulsarlab.runtime import cgroup
from pulsarlab.runtime.endpoints import RecordedDeployment
from pulsarlab.runtime.state import ClusterState
from pulsarlab.runtime.waits import RegistrationGone, log_tail, wait_for
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Role, bookie_id, broker_id
from pulsarlab.topology.settings import without_settings

TIERS = (Role.ZOOKEEPER, Role.BOOKIE, Role.BROKER)
__all__ = ["TIERS", "NodeRuntime", "timeout"]


class NodeRuntime(RecordedDeployment):
    """A topology run under ``state_dir`` by a runtime that acts on its nodes (see
    :class:`pulsarlab.deployment.NodeControl`)."""

    # ----- primitives: what a runtime must say about one node ------------------------------------
    @abc.abstractmethod
    def prepare(self, nodes: list[Node]) -> None:
        """Render what the nodes about to start need (configuration, compose file...)."""

    @abc.abstractmethod
    def spawn(self, node: Node) -> None:
        """Start one node without waiting for it to be ready."""

    def spawn_all(self, nodes: list[Node]) -> None:
        """Start the nodes without waiting for them (a runtime that starts several in one call
        overrides this)."""
        for n in nodes:
            self.spawn(n)

    @abc.abstractmethod
    def stop_process(self, name: str, kill: bool) -> int | None:
        """Stop a running node: SIGTERM and wait (then SIGKILL), or SIGKILL at once. Returns when
        it stopped (wall-clock ns) if the node's machine said so, else None (then: on return)."""

    @abc.abstractmethod
    def pause_process(self, name: str, paused: bool) -> None:
        """Freeze (SIGSTOP-like) or thaw a running node."""

    @abc.abstractmethod
    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        """Run ``bin/pulsar initialize-cluster-metadata <args>`` to completion, its output in ``log_path``."""

    @abc.abstractmethod
    def wipe_data(self) -> None:
        """Remove every node's data (ZooKeeper and bookies go together: cookies must match)."""

    def traffic_cgroup(self, name: str) -> str | None:
        """The cgroup (v2, relative path) that the node's sockets belong to, for packet filters;
        None when it cannot be told (the node is down, or its cgroup cannot be read)."""
        pid, alive, _ = self.process_info(name)
        return cgroup.of_pid(pid) if alive and pid else None

    def cut_problem(self) -> str | None:
        return None  # every node runs on this machine, behind its packet filter

    def before_start(self) -> None:
        """What ``up`` needs of the runtime before it writes anything (an image, an engine):
        got now, or refused with one error."""
        return

    def preflight(self, network: bool = False) -> None:
        return  # this machine's own processes or containers: nothing to ask first

    def running_nodes(self) -> set[str]:
        """The names of the nodes that run now (a runtime that can tell them all in one look overrides this)."""
        return {n.name for n in self.topo.nodes if self.alive(n.name)}

    def forget(self, names: list[str]) -> None:
        """Drop what is recorded of nodes that are gone (a runtime that records pids overrides this)."""
        return

    def teardown(self, keep_data: bool) -> None:
        """After every node stopped in ``down``: remove what the runtime created besides the nodes."""
        return

    # ----- versions: which distribution each node starts from (an upgrade moves them one by one) ---
    def node_distribution(self, name: str) -> Distribution:
        """The distribution the node starts from: its own since an upgrade moved it, else the deployment's."""
        home = self.state.node_distributions.get(name) or self.state.distribution
        if not home or (self.dist is not None and str(self.dist.home) == home):
            return self.distribution()
        return _resolved(home)  # an upgrade moved it (or the deployment) since this handle resolved its own

    def stage_release(self, dist: Distribution) -> None:
        """Nothing to do before an upgrade stops a node: a resolved distribution is a folder here."""
        return

    def record_version(self, version: str, dist: Distribution | None, done: bool) -> None:
        """An upgrade to ``version`` under way (``done`` False), or complete: ``dist`` is then the
        deployment's distribution and no node has one of its own."""
        def change(state: ClusterState) -> None:
            if done and dist is not None:
                state.distribution, state.version, state.node_distributions, state.upgrading_to = (
                    str(dist.home), dist.version, {}, "")
            else:
                state.upgrading_to = version

        self._change_state(change)
        if done and dist is not None:
            self.dist = dist

    def _change_state(self, change: Callable[[ClusterState], object]) -> None:
        """Apply ``change`` to the state as saved now and save it: another handle (an upgrade, a
        CLI command) may have recorded nodes it started since this one loaded it."""
        with self._lock:
            saved = ClusterState.load(self.state_dir)
            if saved is not None:
                self.state = saved
            change(self.state)
            self.state.save(self.state_dir)

    # ----- paths and logs ---------------------------------------------------------------------
    def dirs(self, node: Node) -> NodeDirs:
        return node_dirs(self.state_dir, node)

    def log_file(self, name: str) -> Path | None:
        return self.dirs(self.topo.node(name)).log_file

    def log_tail(self, name: str, lines: int = 25) -> str:
        return log_tail(self.log_file(name), lines)

    # ----- readiness -----------------------------------------------------------------------------
    def wait_ready(self, node: Node) -> float:
        probe = self.readiness_probe(node)
        try:
            secs = wait_for(  # polled often: every step of a start waits on one of these
                node.name, probe, what=probe.description, timeout=timeout(node.role.value),
                log_file=self.log_file(node.name), alive=lambda: self.alive(node.name), interval=0.25,
            )
        except BaseException:
            self.say.end(node.name, "not ready", ok=False)
            raise
        self.say.end(node.name, f"ready ({secs:.1f}s)")
        return secs

    def check_ports(self, nodes: list[Node]) -> None:
        """Refuse before anything starts if an address/port a node needs is taken."""
        wanted = {n.name for n in nodes}
        for node, addr, port in self.topo.endpoints():
            if node.name not in wanted:
                continue
            exc = _bind_error(addr, port)
            if exc is not None and exc.errno == errno.EADDRINUSE:
                listener = _listener(addr, port)
                if listener is not None and self._own_previous_jvm(node, listener):
                    # a node that stopped by itself, still closing: waited for as a stop waits
                    self.say(f"{node.name}: waiting for its previous JVM (pid {listener.pid}) to close its ports")
                    self.wait_ports_released(node)
                    continue
                raise PortInUseError(node.name, addr, port, _describe(listener) if listener else "")
            if exc is not None:
                raise StateError(f"cannot bind {addr}:{port} for node {node.name}: {exc}")

    def _own_previous_jvm(self, node: Node, proc: psutil.Process) -> bool:
        """Whether ``proc`` is a JVM of this node of this deployment (its ``-Dpulsarlab.node`` and
        state folder on its command line); another process's port is never waited for."""
        try:
            cmd = proc.cmdline()
        except psutil.Error:
            return False
        return f"-Dpulsarlab.node={node.name}" in cmd and any(str(self.state_dir) in a for a in cmd)

    def wait_ports_released(self, node: Node) -> None:
        """After a kill: the JVM's main thread can be reaped while its other threads still hold its
        sockets for a moment; a node is stopped once its ports can be bound again."""
        mine = [(addr, port) for n, addr, port in self.topo.endpoints() if n.name == node.name]

        def released() -> tuple[bool, str]:
            held = [f"{a}:{p}" for a, p in mine if (e := _bind_error(a, p)) is not None and e.errno == errno.EADDRINUSE]
            return not held, f"still bound: {', '.join(held)}"

        wait_for(node.name, released, what="its ports to be released", timeout=timeout("stop"), interval=0.2)

    def registration_id(self, node: Node) -> str | None:
        """The name a bookie or broker registers under in the metadata store."""
        if node.role == Role.BOOKIE:
            return bookie_id(self.topo, node)
        if node.role == Role.BROKER:
            return broker_id(self.topo, node)
        return None

    def wait_registration_gone(self, node: Node) -> None:
        """A killed bookie or broker holds its registration until its session expires; a new
        process with the same id would fail to register (and hang), so wait that out first."""
        reg = self.registration_id(node)
        if reg is None:  # ZooKeeper itself: asked nothing (on docker each look at a node is an engine call)
            return
        zks = [z for z in self.topo.nodes_of(Role.ZOOKEEPER) if self.alive(z.name)]
        if not zks:
            return
        probe = RegistrationGone(tuple((self.topo.address_of(z), z.port("client")) for z in zks), reg)
        if not probe()[0]:
            self.say(f"{node.name}: waiting for its previous session to expire")
        wait_for(node.name, probe, what=probe.description, timeout=timeout("session"), interval=1.0)

    # ----- starting ----------------------------------------------------------------------------
    def start_nodes(self, nodes: list[Node], before_brokers: Callable[[NodeControl], None] | None = None,
                    brokers_ready: Callable[[NodeControl], None] | None = None) -> None:
        """Start the nodes, each as soon as what it needs is there.

        ZooKeeper first, the metadata initialisation alongside it (its client waits for the
        server). Then ``before_brokers`` (the rack map: every broker starts knowing its region) and
        the brokers, which need no bookie to start; meanwhile the bookies. On a cluster whose
        metadata was just created one bookie per cluster starts before the others: bookies that
        start together on an empty cluster race to create the auto-recovery layout znode and the
        losers exit (``BadVersion for /ledgers/underreplication/LAYOUT``). ``brokers_ready`` runs
        as soon as one broker of each cluster is ready, while the other nodes may still be
        starting (it writes metadata through any broker and needs no bookie)."""
        zookeepers, bookies, brokers = ([n for n in nodes if n.role == r] for r in TIERS)
        fresh: set[str] = set()
        if zookeepers:
            fresh = self._start_zookeeper(zookeepers, with_metadata=bool(bookies))
        if bookies:
            fresh |= self.initialize_metadata()  # nothing left to do when it ran alongside ZooKeeper
            early = brokers
            if early and before_brokers is not None:
                before_brokers(self)
            first = [b for b in bookies if b.cluster in fresh and b == self.topo.first_bookie(b.cluster)]
            if not first or len(first) == len(bookies):
                first = []
            # the brokers and the first bookies in one spawn: a runtime that starts nodes by one
            # call (a compose up) pays that call's start once
            self._spawn(early + first)
            self._wait_ready(first)
            rest = [n for n in bookies if n not in first]
            self._spawn(rest)
            with ThreadPoolExecutor(max_workers=1) as side:
                bookies_ready = side.submit(self._wait_ready, rest)
                self._wait_brokers(early, brokers_ready)
                bookies_ready.result()
            for c in dict.fromkeys(n.cluster for n in bookies if n.cluster is not None):  # a bookie always has one
                self.wait_writable_bookies(c)
            self.rack_map_reread()
            brokers = [n for n in brokers if n not in early]
        if not brokers:
            return
        if before_brokers is not None:
            before_brokers(self)
        self._start_tier(brokers)

    def _wait_brokers(self, brokers: list[Node], one_each: Callable[[NodeControl], None] | None) -> None:
        """Wait for every broker; ``one_each`` runs once one broker of each cluster is ready, while
        the others are still waited for."""
        if not brokers:
            return
        with ThreadPoolExecutor(max_workers=len(brokers)) as pool:
            waits = {pool.submit(self.wait_ready, n): n for n in brokers}
            pending = {n.cluster for n in brokers}
            for f in as_completed(waits):
                f.result()
                pending.discard(waits[f].cluster)
                if not pending and one_each is not None:
                    one_each(self)
                    one_each = None

    def _start_zookeeper(self, tier: list[Node], with_metadata: bool) -> set[str]:
        """Start ZooKeeper and, with ``with_metadata``, initialise the clusters' metadata meanwhile;
        returns the clusters initialised now. An initialisation that failed while ZooKeeper was
        still starting runs once more once it serves."""
        with ThreadPoolExecutor(max_workers=len(tier) + 1) as pool:
            # the initialisation's start does not wait for ZooKeeper's (a docker runtime's compose
            # call to start a container takes a fifth of a second): its client waits for the server
            init = pool.submit(self.initialize_metadata) if with_metadata else None
            self._spawn(tier)
            ready = [pool.submit(self.wait_ready, n) for n in tier]
            for f in ready:
                f.result()  # ZooKeeper's own failure is the one to report
            if init is None:
                return set()
            try:
                return init.result()
            except (NodeStartError, ProcessFailedError) as exc:
                self.say(f"metadata initialisation failed while ZooKeeper was starting ({exc}); running it again")
        return self.initialize_metadata()

    def _spawn(self, nodes: list[Node]) -> None:
        for n in nodes:
            self.say.begin(n.name, n.name, "starting")
            self.wait_registration_gone(n)
        if nodes:
            self.spawn_all(nodes)

    def _wait_ready(self, nodes: list[Node]) -> None:
        if not nodes:
            return
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            for f in [pool.submit(self.wait_ready, n) for n in nodes]:
                f.result()

    def _start_tier(self, tier: list[Node]) -> None:
        self._spawn(tier)
        self._wait_ready(tier)

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
            args = [
                "--cluster", cluster,
                "--metadata-store", self.topo.metadata_store_url(cluster),
                "--configuration-metadata-store", self.topo.configuration_store_url(),
                "--web-service-url", self.topo.registered_web_url(cluster),
                "--broker-service-url", self.topo.service_url(cluster),
            ]
            if not self.topo.runs_stream_storage(cluster):  # its metadata, a ZooKeeper session and ~0.2 s less
                args += ["--initial-num-stream-storage-containers", "0"]
            if self.topo.tls:  # the same TLS URLs in both fields: the plain-text ports are off
                args += ["--web-service-url-tls", self.topo.registered_web_url(cluster),
                         "--broker-service-url-tls", self.topo.service_url(cluster)]
            with self.say.step(f"init-{cluster}", f"cluster {cluster}: metadata", "initializing", "initialized"):
                self.run_metadata_init(cluster, args, log_path)

        # one after the other: the clusters share one configuration store, where each init creates
        # or updates the same objects (the public tenant and namespace), and two at once could race
        for c in todo:
            init(c.name)
        self.state.initialized = sorted({*self.state.initialized, *(c.name for c in todo)})
        self.state.save(self.state_dir)
        return {c.name for c in todo}

    def rack_map_reread(self) -> None:
        """Once bookies have registered: have every running broker resolve every bookie's rack again
        (see :func:`pulsarlab.admin.racks.write_rack_maps`), when the topology places by rack or region."""
        if not any(rack_document(self.topo, c.name) for c in self.topo.clusters):
            return  # no rack map: nothing to resolve
        if not any(n.role == Role.BROKER and self.alive(n.name) for n in self.topo.nodes):
            return  # a broker that starts later reads the map whole
        with self.say.step("racks-reread", "rack map re-read by the brokers", "writing", "written"):
            write_rack_maps(self, touch=True)

    def wait_writable_bookies(self, cluster: str) -> None:
        """Every running bookie of the cluster is registered writable (and at least the ensemble's
        number): a ledger created before some are would be placed without them; with region-aware
        placement, a region whose bookies register late would get no copy of it.

        Which bookies run is read again at every poll, and any running bookie that answers gives
        the cluster's registrations: a bookie that stops meanwhile (its metadata session outlasted
        by a restart of the only ZooKeeper node, its JVM writing a class archive on its way out)
        neither stalls the wait nor is waited for."""
        need = self.topo.cluster(cluster).persistence.ensemble
        bookies = self.topo.nodes_of(Role.BOOKIE, cluster)
        running = [b for b in bookies if self.alive(b.name)]
        want = max(need, len(running))

        missing = list(running)  # the log shown if the wait fails: a running bookie not listed

        def registered() -> tuple[bool, str]:
            alive = [b for b in bookies if self.alive(b.name)]
            got = bookie_get(self, cluster, "/api/v1/bookie/list_bookies?type=rw&print_hostnames=false")
            if got is None:
                missing[:] = alive
                return False, "no running bookie of the cluster answers"
            name, listed = got
            listed = set(listed or ())
            missing[:] = [b for b in alive if bookie_id(self.topo, b) not in listed]
            if len(listed) >= need and not missing:
                return True, "ok"
            # a bookie that registered read-only (a disk over diskUsageThreshold, say) is no writable one
            ro = bookie_get(self, cluster, "/api/v1/bookie/list_bookies?type=ro&print_hostnames=false") if missing else None
            read_only = sorted(set(ro[1] or ()) & {bookie_id(self.topo, b) for b in missing}) if ro else []
            return False, (f"{name} lists {', '.join(sorted(listed)) or 'none'}; "
                           f"running: {', '.join(sorted(bookie_id(self.topo, b) for b in alive))}"
                           + (f"; registered read-only: {', '.join(read_only)}" if read_only else "")
                           + (f"; the log below is {missing[0].name}'s" if missing else ""))

        with self.say.step(f"writable-{cluster}", f"cluster {cluster}: {want} writable bookies", "waiting", "registered"):
            wait_for(
                cluster, registered,
                what=f"every running bookie of cluster {cluster} "
                     f"({', '.join(sorted(bookie_id(self.topo, b) for b in running))}) registered writable, "
                     f"at least {need}", timeout=timeout("bookie"),
                log_file=lambda: self.log_file(missing[0].name) if missing else None,
            )

    def up(
        self, check: Callable[[NodeControl], None] | None = None,
        before_brokers: Callable[[NodeControl], None] | None = None,
        brokers_ready: Callable[[NodeControl], None] | None = None,
    ) -> UpResult:
        """Bring every node up and ready; safe to re-run. ``check`` runs once all nodes are ready;
        ``before_brokers`` before any broker
        starts; ``brokers_ready`` once the brokers are, if they started with the bookies (see
        :meth:`start_nodes`)."""
        t0 = time.monotonic()
        previous = ClusterState.load(self.state_dir)
        if previous is not None:
            if previous.runtime != self.runtime:
                raise StateError(
                    f"{self.state_dir} holds a cluster of the {previous.runtime!r} runtime; "
                    "run 'pulsarlab down' first or choose another --state-dir"
                )
            recorded_file = self.state_dir / "topology.yaml"
            recorded = yaml.safe_load(recorded_file.read_text()) if recorded_file.is_file() else None
            wanted = self.topo.model_dump(mode="json")
            running = sorted(self.running_nodes(), key=[n.name for n in self.topo.nodes].index)
            if without_settings(recorded) != without_settings(wanted) and (previous.initialized or running):
                raise StateError(
                    f"{self.state_dir} holds a different {previous.name!r} cluster; "
                    "run 'pulsarlab down' first or choose another --state-dir"
                )
            # new settings reach a running deployment through 'up --apply' (every node running), never
            # by starting some nodes with them beside others left on the old ones
            if 0 < len(running) < len(self.topo.nodes) and recorded is not None and _without_release(
                    recorded) != _without_release(wanted):
                raise StateError(
                    f"the settings of {previous.name!r} changed while only some of its nodes run "
                    f"({', '.join(running)}): start the rest with its recorded topology "
                    f"({recorded_file}) first, then 'pulsarlab up --apply' with the new one")
        alive = self.running_nodes()
        missing = [n for n in self.topo.nodes if n.name not in alive]
        if not missing:
            return UpResult(True, time.monotonic() - t0, [])
        self.forget([n.name for n in missing])  # pids of processes that are gone (a crash, a reboot)
        fresh = not self.state.initialized
        self.before_start()
        self.check_ports(missing)
        dist = self.distribution()
        self.state.distribution, self.state.version = str(dist.home), dist.version
        if self.topo.security is not None:  # the cryptography libraries load only for a secure deployment
            from pulsarlab.security import material

            material.ensure(self.topo, self.state_dir)  # kept as is when it exists
        self.prepare(missing)
        self.state.save(self.state_dir)
        started = [n.name for n in missing]
        try:
            self.start_nodes(missing, before_brokers, brokers_ready)
            if check is not None:
                check(self)
        except BaseException:
            self.say("start failed: stopping the nodes this run started")
            for name in reversed(started):
                if self.alive(name):
                    self.stop_process(name, kill=True)
            self.forget(started)
            if fresh:
                self.wipe_data()
                self.state.initialized = []
            self.state.save(self.state_dir)
            raise
        return UpResult(False, time.monotonic() - t0, started)

    # ----- node control ------------------------------------------------------------------------
    def stop_node(self, name: str, kill: bool = False) -> int:
        node = self.topo.node(name)
        stopped = time.time_ns()
        if not self.alive(node.name):
            self.say(f"{name} is not running")
        else:
            pid = self.process_info(name)[0]
            said = self.stop_process(name, kill)
            stopped = said if said is not None else time.time_ns()
            self.wait_ports_released(node)
            how = "killed (SIGKILL" if kill else "stopped ("
            self.say(f"{name} {how}{', ' if kill else ''}{f'pid {pid}' if pid else self.runtime})")
        self.forget([node.name])
        return stopped

    def start_node(self, name: str) -> None:
        self.start_group([name])

    def start_group(self, names: list[str]) -> None:
        """Start the named nodes that are not running, tier by tier, each tier at once; on failure
        the ones this call started are stopped again."""
        nodes = [self.topo.node(n) for n in names]
        for n in nodes:
            if self.alive(n.name):
                self.say(f"{n.name} is already running")
        todo = [n for n in nodes if not self.alive(n.name)]
        if not todo:
            return
        self.check_ports(todo)
        try:
            self.start_nodes(todo)
        except BaseException:
            for n in todo:
                if self.alive(n.name):
                    self.stop_process(n.name, kill=True)
            self.forget([n.name for n in todo])
            raise

    def wipe_node_data(self, name: str) -> None:
        """Remove one stopped node's data (its disk lost); refused while it runs."""
        node = self.topo.node(name)
        if self.alive(node.name):
            raise StateError(f"node {name} is running: stop it before removing its data")
        self.wipe_node(node)
        self.say(f"{name}: data removed")

    @abc.abstractmethod
    def wipe_node(self, node: Node) -> None:
        """Remove the data of one stopped node."""

    def pause_node(self, name: str) -> None:
        self._running(name)
        self.pause_process(name, True)
        self.say(f"{name} paused")

    def resume_node(self, name: str) -> None:
        self._running(name)
        self.pause_process(name, False)
        self.say(f"{name} resumed")

    def _running(self, name: str) -> None:
        if not self.alive(self.topo.node(name).name):
            raise StateError(f"node {name} is not running")

    def down(self, keep_data: bool = False) -> list[str]:
        """Stop every node (brokers, then bookies, then ZooKeeper); wipe data unless kept. Data
        kept: each node stops gracefully (SIGTERM). Data wiped: nothing a graceful stop protects
        survives it, so a node is killed at once unless :meth:`exits_cleanly_on_down` says it must
        exit by itself (a graceful stop would only wait: a bookie that is not its cluster's
        auditor spends 10 s in the close of its auto-recovery, waiting for an election it lost)."""
        stopped = []
        for role in reversed(TIERS):
            names = [n.name for n in self.topo.nodes_of(role) if self.alive(n.name)]
            with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
                kill = {name: not keep_data and not self.exits_cleanly_on_down(name) for name in names}
                for f in [pool.submit(self._stop_shown, name, kill[name]) for name in names]:
                    f.result()
            stopped += names
        self.forget([n.name for n in self.topo.nodes])
        from pulsarlab.chaos.netfilter import remove_if_any  # no cluster is left half-cut

        if cut := remove_if_any(self.state_dir):
            self.say(f"removed {cut} packet filter rule(s) of this deployment")
        left = [n.name for n in self.topo.nodes if self.alive(n.name)]
        if left:
            raise StateError(f"nodes still running after down: {', '.join(left)}")
        self.teardown(keep_data)
        if keep_data:
            self.state.save(self.state_dir)
        else:
            self.wipe_data()
            ClusterState.path(self.state_dir).unlink(missing_ok=True)
        return stopped

    def exits_cleanly_on_down(self, name: str) -> bool:
        """Whether ``down`` must stop this node gracefully even though its data is wiped next: a JVM
        that records its role's class archive writes it only when it exits by itself."""
        return any(arg.startswith(RECORD_FLAGS) for arg in self.jvm_command_line(name) or [])

    def _stop_shown(self, name: str, kill: bool = False) -> None:
        with self.say.step(name, name, "killing" if kill else "stopping", "stopped"):
            self.stop_process(name, kill)

def _without_release(topology: object) -> object:
    """A dumped topology without its Pulsar release (``upgrade`` changes that on a running deployment)."""
    return {k: v for k, v in topology.items() if k != "pulsar_version"} if isinstance(topology, dict) else topology


def _bind_error(addr: str, port: int) -> OSError | None:
    """Why ``addr:port`` cannot be bound now (None if it can)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, port))
        except OSError as exc:
            return exc
    return None


def _listener(addr: str, port: int) -> psutil.Process | None:
    """The process that listens on ``addr:port`` (None when none this user may see does)."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.laddr.ip in (addr, "0.0.0.0", "::"):
            try:
                return psutil.Process(c.pid) if c.pid is not None else None
            except psutil.Error:
                return None
    return None


def _describe(proc: psutil.Process) -> str:
    """``pid N: command line`` (a long one shortened in the middle: a JVM's main class and config come last)."""
    try:
        cmd = " ".join(" ".join(proc.cmdline()).split())
    except psutil.Error:
        cmd = "?"
    return f"pid {proc.pid}: {cmd if len(cmd) <= 200 else f'{cmd[:80]} ... {cmd[-110:]}'}"


@functools.cache
def _resolved(home: str) -> Distribution:
    return resolve(home)
