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
from pathlib import Path

import psutil

from pulsarlab.errors import NodeStartError, ProcessFailedError
from pulsarlab.render import render
from pulsarlab.runtime import cgroup
from pulsarlab.runtime.base import NodeRuntime, timeout
from pulsarlab.runtime.jvm import hosts_text, pulsar_env
from pulsarlab.runtime.state import ClusterState, ProcessRecord
from pulsarlab.runtime.waits import log_tail
from pulsarlab.topology import Node, Role

COMMAND = {Role.ZOOKEEPER: "zookeeper", Role.BOOKIE: "bookie", Role.BROKER: "broker"}


class LocalCluster(NodeRuntime):
    """A topology run as local processes under ``state_dir``."""

    runtime = "local"

    # ----- processes ---------------------------------------------------------------------------
    def record(self, name: str) -> ProcessRecord | None:
        return self.state.nodes.get(name)

    def node_alive(self, name: str) -> bool:
        rec = self.record(name)
        return rec is not None and rec.alive()

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        rec = self.record(name)
        alive = rec is not None and rec.alive()
        return (rec.pid if rec else None), alive, alive and rec.paused()

    def stop_process(self, name: str, kill: bool) -> None:
        rec = self.record(name)
        if rec is None:
            return
        if kill:
            rec.kill()
        else:
            rec.terminate(timeout("stop"))

    def pause_process(self, name: str, paused: bool) -> None:
        rec = self.record(name)
        if rec is not None:
            rec.signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def forget(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                self.state.nodes.pop(name, None)
            if ClusterState.path(self.state_dir).is_file():
                self.state.save(self.state_dir)

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
        render(self.topo, self.state_dir, self.distribution().conf)

    def _env(self, node: Node) -> dict[str, str]:
        dist = self.distribution()
        dirs = self.dirs(node)
        env = dict(os.environ)
        env.update(pulsar_env(self.topo, node, dirs))
        if dist.java.home:
            env["JAVA_HOME"] = str(dist.java.home)
        return env

    def write_local_hosts(self, node: Node) -> None:
        """The broker's own view of this machine's name (see :func:`pulsarlab.runtime.jvm.hosts_text`)."""
        path = self.dirs(node).conf / "hosts"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hosts_text(self.topo, node))

    def spawn(self, node: Node) -> None:
        """Start one node's JVM in the background and record its pid."""
        dist = self.distribution()
        dirs = self.dirs(node)
        for d in (dirs.data, dirs.logs):
            d.mkdir(parents=True, exist_ok=True)
        if node.role == Role.BROKER:
            self.write_local_hosts(node)
        with open(dirs.log_file, "ab") as log:
            log.write(f"\n===== pulsarlab: starting {node.name} at {time.ctime()} =====\n".encode())
            log.flush()
            proc = subprocess.Popen(
                [str(dist.bin_pulsar), COMMAND[node.role]], cwd=dirs.root, env=self._env(node),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=cgroup.entering(self.state_dir, node.name),
            )
        rec = ProcessRecord(proc.pid, psutil.Process(proc.pid).create_time())
        dirs.pid_file.write_text(f"{proc.pid}\n")
        with self._lock:
            self.state.nodes[node.name] = rec
            self.state.save(self.state_dir)
        self.say.update(node.name, f"started (pid {proc.pid}, {self.topo.address_of(node)})")

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        zk = self.topo.nodes_of(Role.ZOOKEEPER)[0]
        env = self._env(zk)
        cmd = [str(self.distribution().bin_pulsar), "initialize-cluster-metadata", *args]
        with open(log_path, "wb") as log:
            try:
                rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    timeout=timeout("init"), cwd=self.state_dir).returncode
            except subprocess.TimeoutExpired:
                raise NodeStartError(f"init-{cluster}", "initialize-cluster-metadata to finish",
                                     timeout("init"), log_tail(log_path)) from None
        if rc != 0:
            raise ProcessFailedError(cmd, rc, log_tail(log_path, 40))
