"""The local runtime: every node is a real Pulsar JVM process on its own loopback address.

Every process is recorded in the state directory by pid and start time, and only those
processes are ever signalled. What all runtimes share (start order, readiness, up/down) is in
:mod:`pulsarlab.runtime.base`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from pulsarlab.distribution import Distribution
from pulsarlab.errors import NodeStartError, ProcessFailedError
from pulsarlab.render import NodeDirs, render_node, write_topology
from pulsarlab.runtime import cgroup
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.cds import class_archives, classpath_dir, node_recording
from pulsarlab.runtime.external import answers
from pulsarlab.runtime.jvm import hosts_text, log_conf_off_the_classpath, pulsar_env
from pulsarlab.runtime.state import ClusterState, ProcessRecord
from pulsarlab.runtime.waits import log_tail
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Role


class LocalCluster(NodeRuntime):
    """A topology run as local processes under ``state_dir``."""

    runtime = "local"

    # ----- processes ---------------------------------------------------------------------------
    def record(self, name: str) -> ProcessRecord | None:
        """The node's process; when the one this handle knows is gone, the one the state directory
        records now (another handle, a CLI command or a fault schedule, may have started it since)."""
        rec = self.state.nodes.get(name)
        if rec is None or not rec.alive():
            saved = ClusterState.load(self.state_dir)
            newer = saved.nodes.get(name) if saved is not None else None
            if newer is not None and newer != rec and newer.alive():
                self.state.nodes[name] = rec = newer
        return rec

    def node_alive(self, name: str) -> bool:
        rec = self.record(name)
        return rec is not None and rec.alive()

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        rec = self.record(name)
        alive = rec is not None and rec.alive()
        return (rec.pid if rec else None), alive, rec is not None and alive and rec.paused()

    def stop_process(self, name: str, kill: bool) -> None:
        rec = self.record(name)
        if rec is None:
            return
        if kill:
            rec.kill()
            clean = False
        else:
            clean = rec.terminate(timeout("archive" if self.exits_cleanly_on_down(name) else "stop"), kill_after=False)
            if not clean:
                rec.kill()
        node = self.topo.node(name)
        if (part := self._recording(node.role.value, node)) is not None:
            class_archives(self.node_distribution(name)).settle(node.role.value, part, clean)

    def _recording(self, kind: str, node: Node) -> Path | None:
        """Where this JVM records its kind's class archive, if it is the one that does: the
        first node of each role (one archive suffices)."""
        if not self.topo.jvm.class_sharing or self.topo.nodes_of(node.role)[0].name != node.name:
            return None
        return node_recording(class_archives(self.node_distribution(node.name)), kind, node.name, self.state_dir)

    # ----- versions ----------------------------------------------------------------------------
    def jvm_command_line(self, name: str) -> list[str] | None:
        rec = self.record(name)
        proc = rec.process() if rec is not None else None
        try:
            return proc.cmdline() if proc is not None else None
        except psutil.Error:
            return None

    def place_node(self, name: str, dist: Distribution) -> None:
        node = self.topo.node(name)
        self._write_files(node, dist)
        self._change_state(lambda state: state.node_distributions.__setitem__(name, str(dist.home)))

    def pause_process(self, name: str, paused: bool) -> None:
        rec = self.record(name)
        if rec is not None:
            rec.signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def forget(self, names: list[str]) -> None:
        if not ClusterState.path(self.state_dir).is_file():
            with self._lock:
                for name in names:
                    self.state.nodes.pop(name, None)
            return
        self._change_state(lambda state: [state.nodes.pop(name, None) for name in names])


    def traffic_cgroup(self, name: str) -> str | None:
        """The node's own cgroup where nodes are started in one (as root), also while it is down
        (it comes back into the same one); else where its process is."""
        if cgroup.usable() is not None:
            pid, alive, _ = self.process_info(name)
            return cgroup.of_pid(pid) if alive and pid else cgroup.node_path(self.state_dir, name)
        return super().traffic_cgroup(name)

    def teardown(self, keep_data: bool) -> None:
        super().teardown(keep_data)
        cgroup.remove(self.state_dir)

    def wipe_data(self) -> None:
        for n in self.topo.nodes:
            self.wipe_node(n)

    def wipe_node(self, node: Node) -> None:
        shutil.rmtree(self.dirs(node).data, ignore_errors=True)

    # ----- starting ----------------------------------------------------------------------------
    def prepare(self, nodes: list[Node]) -> None:
        """The files of the nodes about to start, each over the ``conf/`` of the distribution it starts from."""
        for node in nodes:
            self._write_files(node, self.node_distribution(node.name))
        write_topology(self.topo, self.state_dir)

    def _write_files(self, node: Node, dist: Distribution) -> None:
        for path, text in render_node(self.topo, node, self.dirs(node), dist.conf).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)

    def _env(self, node: Node, kind: str | None = None) -> dict[str, str]:
        """``bin/pulsar``'s environment for a node's JVM (``kind``: which class archive it maps or
        records; None for none)."""
        dist = self.node_distribution(node.name)
        dirs = self.dirs(node)
        env = dict(os.environ)
        env.update(pulsar_env(self.topo, node, dirs))
        if dist.java.home:
            env["JAVA_HOME"] = str(dist.java.home)
        if node.role == Role.BOOKIE:  # see write_local_hosts
            for key in ("PULSAR_EXTRA_OPTS", "BOOKIE_EXTRA_OPTS"):
                env[key] = f"{env[key]} -Djdk.net.hosts.file={dirs.conf / 'hosts'}"
        if node.role in TMP_ROLES:  # the temp folder: see spawn
            for key in ("PULSAR_EXTRA_OPTS", "BOOKIE_EXTRA_OPTS"):
                env[key] = f"{env[key]} -Djava.io.tmpdir={node_tmp(dirs)}"
        if self.topo.jvm.class_sharing:
            archives = class_archives(dist)
            log_conf_off_the_classpath(env, classpath_dir(archives))  # one classpath for every node
            if kind is not None:
                opts = archives.jvm_options(kind, self._recording(kind, node))
                for key in ("PULSAR_EXTRA_OPTS", "BOOKIE_EXTRA_OPTS"):
                    env[key] = f"{env[key]} {opts}".strip()
        return env

    def write_local_hosts(self, node: Node) -> None:
        """A broker's own view of this machine's name (see :func:`pulsarlab.runtime.jvm.hosts_text`);
        a bookie's: the machine's hosts file as it is, with no DNS behind it.

        A bookie looks up the name of every address in the rack map (in its auto-recovery's
        placement policy); loopback addresses have none, so each lookup goes to DNS, and a query
        the resolver drops costs the starting bookie 5 s. The answer is "no name" either way."""
        path = self.dirs(node).conf / "hosts"
        path.parent.mkdir(parents=True, exist_ok=True)
        if node.role == Role.BROKER:
            path.write_text(hosts_text(self.topo, node))
        else:
            try:
                path.write_text(Path("/etc/hosts").read_text())
            except OSError:
                path.write_text("127.0.0.1 localhost\n")

    def spawn(self, node: Node) -> None:
        """Start one node's JVM in the background and record its pid."""
        dist = self.node_distribution(node.name)
        dirs = self.dirs(node)
        for d in (dirs.data, dirs.logs):
            d.mkdir(parents=True, exist_ok=True)
        if node.role in TMP_ROLES:
            # native libraries unpacked into the JVM's temp folder at every start and left there (a
            # bookie's RocksDB, 13 MB; the checksum library of a bookie's and a broker's BookKeeper
            # client, in a folder of its own): in the node's own folder, emptied here (the JVM that
            # unpacked them is gone) and wiped with the node's data, not /tmp filling up
            shutil.rmtree(node_tmp(dirs), ignore_errors=True)
            node_tmp(dirs).mkdir()
        if node.role in (Role.BROKER, Role.BOOKIE):
            self.write_local_hosts(node)
        with open(dirs.log_file, "ab") as log:
            log.write(f"\n===== pulsarlab: starting {node.name} at {time.ctime()} =====\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [str(dist.bin_pulsar), node.role.start_command], cwd=dirs.root, env=self._env(node, node.role.value),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=cgroup.entering(self.state_dir, node.name),
            )
        rec = ProcessRecord(proc.pid, psutil.Process(proc.pid).create_time())
        dirs.pid_file.write_text(f"{proc.pid}\n")
        self._change_state(lambda state: state.nodes.__setitem__(node.name, rec))
        self.say.update(node.name, f"started (pid {proc.pid}, {self.topo.address_of(node)})")

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        zk = self.topo.nodes_of(Role.ZOOKEEPER)[0]
        env = self._env(zk, "init")
        part = self._recording("init", zk)
        rc: int | None = None
        cmd = [str(self.distribution().bin_pulsar), "initialize-cluster-metadata", *args]
        zookeepers = self.topo.nodes_of(Role.ZOOKEEPER)
        with open(log_path, "wb") as log, subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir
        ) as proc:
            try:
                hold_until_listening(proc, log_path, lambda: any(answers(self.topo, z) for z in zookeepers),
                                     time.monotonic() + timeout("zookeeper"))
                rc = proc.wait(timeout("init"))
            except subprocess.TimeoutExpired:
                raise NodeStartError(f"init-{cluster}", "initialize-cluster-metadata to finish",
                                     timeout("init"), log_tail(log_path)) from None
            finally:
                if proc.poll() is None:  # timed out, or this command was interrupted
                    proc.kill()
                    proc.wait()
                if part is not None:
                    class_archives(self.distribution()).settle("init", part, rc == 0)
        if rc != 0:
            raise ProcessFailedError(cmd, rc, log_tail(log_path, 40))


TMP_ROLES = (Role.BOOKIE, Role.BROKER)  # the roles whose JVMs unpack native libraries

# what the metadata initialisation logs just before its ZooKeeper client's first connection attempt
# (the first line of Pulsar's setup tool; then the client's own): some 0.1 s before it
CONNECTING = (b"Setting up cluster", b"Initiating client connection")


def hold_until_listening(proc: subprocess.Popen, log_path: Path, listening: Callable[[], bool],
                         give_up_at: float) -> None:
    """Keep the metadata initialisation from connecting before ZooKeeper listens.

    It starts beside ZooKeeper, and the two JVMs reach their sockets within some tens of
    milliseconds of each other. A ZooKeeper client refused on its first attempt waits a whole
    second before the next (its list of servers gone round once), and every node of the cluster
    waits for the initialisation: in about one fresh start in four that second, and more, was
    lost. So the process is frozen (SIGSTOP) when its log shows it about to connect while
    ``listening()`` (a ZooKeeper server accepts a connection) is false, and thawed the moment it
    is true, or at ``give_up_at``: the first connection that ZooKeeper accepts ends the watch, and
    the process is never left frozen."""
    held, text = False, b""
    try:
        with open(log_path, "rb") as log:
            while proc.poll() is None and time.monotonic() < give_up_at:
                if listening():
                    return
                if not held:
                    text += log.read()
                    if any(marker in text for marker in CONNECTING):
                        os.kill(proc.pid, signal.SIGSTOP)
                        held = True
                time.sleep(0.01)
    finally:
        if held and proc.poll() is None:  # not once it is gone (its pid may be another's by then)
            os.kill(proc.pid, signal.SIGCONT)


def node_tmp(dirs: NodeDirs) -> Path:
    """A bookie's or broker's ``java.io.tmpdir``."""
    return dirs.data / "tmp"
