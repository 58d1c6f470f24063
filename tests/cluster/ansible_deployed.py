"""One deployment of the playbooks on rehearsal hosts, as the tests of ``test_ansible.py`` use it:
the nodes' JVMs and the distribution each runs from, a recorded workload in the background, and
the verifier's verdict over it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pulsarlab.chaos import targets
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import PulsarlabError
from pulsarlab.history import read_history
from pulsarlab.runtime import open_deployment
from pulsarlab.scenarios.rto import read_sends
from pulsarlab.topology import Topology, bookie_id
from tests.cluster.ansible_hosts import LabHosts, Play, docker
from tests.eventually import eventually
from tests.interrupt import default_sigint
from tests.message_ids import ledger_entry


@dataclass
class Deployed:
    hosts: LabHosts  # all nine hosts
    small: Topology  # what deploy.yml put on eight of them
    big_ref: str  # the same with NEW_BOOKIE appended (add-bookie's re-render)
    render_dir: Path
    state_dir: Path
    deploy: Play

    @property
    def inventory(self) -> Path:
        return self.render_dir / "inventory.yml"

    def cluster(self) -> Endpoints:
        return open_deployment(self.state_dir)

    def play(self, book: str, *extra: str) -> Play:
        play = self.hosts.playbook(self.inventory, book, *extra)
        print(f"{book} {' '.join(extra)}: rc {play.rc} in {play.seconds:.1f}s")
        return play

    def pids(self) -> dict[str, str]:
        """Each node's JVM pid in its container ('' when none runs)."""
        return {n.name: jvm_pid(self, n.name) for n in self.hosts.topo.nodes}

    def homes(self) -> dict[str, str]:
        """The distribution folder each running node's JVM runs from (its class path's lib/)."""
        out = {}
        for name, pid in self.pids().items():
            if pid:
                cmdline = docker(self.hosts.docker_host, "exec", self.hosts.name(name), "cat", f"/proc/{pid}/cmdline").stdout
                found = set(re.findall(r"(/opt/pulsar/[^/:\x00]+)/lib/", cmdline))
                out[name] = found.pop() if len(found) == 1 else str(sorted(found))
        return out

    def failed(self, play: Play, tail: int = 8000) -> str:
        """A failed play's failed tasks first (a report cut short in its middle keeps them), then its
        output's tail and what each node's host says: its JVM's pid, and for a node without one the
        tail of its log (journal under systemd), so a flake can be told apart."""
        lines = [play.report(tail), "--- the nodes after the play:"]
        for node, pid in self.pids().items():
            lines.append(f"{node}: {'JVM pid ' + pid if pid else 'no JVM runs'}")
            if not pid:
                lines.append(node_log_tail(self, node))
        return "\n".join(lines)

    def url(self, name: str, port: str) -> str:
        topo = self.hosts.topo
        return f"http://{topo.address_of(topo.node(name))}:{topo.node(name).port(port)}"

    def bookie_id(self, name: str) -> str:
        return bookie_id(self.hosts.topo, self.hosts.topo.node(name))


def jvm_pid(deployed: Deployed, node: str) -> str:
    proc = docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node), "pgrep", "-f", f"[-]Dpulsarlab.node={node} ")
    # pgrep: 0 found, 1 none; anything else is a question that got no answer, not "no JVM"
    assert proc.returncode in (0, 1), f"{node}: could not look for its JVM (exit {proc.returncode}): {proc.stderr.strip()}"
    return proc.stdout.strip()


def node_log_tail(deployed: Deployed, node: str, lines: int = 40) -> str:
    host = deployed.hosts
    if node in host.systemd:
        cmd = ["journalctl", "--no-pager", "-n", str(lines), "-u", f"pulsar-{node}"]
    else:
        cmd = ["sh", "-c", f"tail -n {lines} /var/lib/pulsarlab/nodes/{node}/logs/*"]
    proc = docker(host.docker_host, "exec", host.name(node), *cmd)
    return proc.stdout + proc.stderr


def every_node_serving(state: Path | str, env: dict[str, str], timeout: float = 90) -> dict:
    """``pulsarlab status --json`` once every node is alive and ready, waited for: a broker resumed
    from a pause or cut from ZooKeeper longer than its metadata session comes back through a new
    session, which on a loaded machine takes seconds after the heal that ended the fault."""
    def serving() -> dict:
        proc = subprocess.run([sys.executable, "-m", "pulsarlab.cli", "status", "--json", "--state-dir", str(state)],
                              capture_output=True, text=True, timeout=120, env=env)
        status = json.loads(proc.stdout)
        down = [n["name"] for n in status["nodes"] if not (n["alive"] and n["ready"])]
        assert not down and proc.returncode == 0, (down, proc.returncode, proc.stderr[-2000:])
        return status

    return eventually(serving, timeout=timeout, interval=2, what="every node alive and ready")


def cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pulsarlab.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint, **kw)


def longest_without_ack(sends, start_ns: int, end_ns: int) -> float:
    """Seconds of the longest window in [start_ns, end_ns] with no acknowledgement."""
    ok = sends.filter(pc.equal(sends["type"], "ok"))["ts"].to_numpy()
    inside = sorted(t for t in ok.tolist() if start_ns < t < end_ns)
    points = [start_ns, *inside, end_ns]
    return max(b - a for a, b in zip(points, points[1:], strict=False)) / 1e9


@contextmanager
def running_workload(deployed: Deployed, topic: str, run: Path, rate: int, duration: int = 1200) -> Iterator[subprocess.Popen]:
    """``pulsarlab workload run`` (broker deduplication on) in the background, given once the
    topic has a ledger and ten more seconds have passed; :func:`finish_workload` ends its sending
    with a Ctrl-C once the caller's operations are over (``duration`` is only a bound); killed on the
    way out if it still runs."""
    workload = cli("workload", "run", "--state-dir", str(deployed.state_dir), "--out", str(run), "--topic", topic,
                   "--duration", str(duration), "--rate", str(rate), "--deduplication", "--quiet")
    try:
        cluster = deployed.cluster()

        def has_a_ledger() -> None:
            if workload.poll() is not None:
                pytest.fail(workload.communicate()[0])
            assert ensemble_or_none(cluster, topic), f"{topic} has no ledger yet"

        eventually(has_a_ledger, timeout=90, interval=1, what=f"{topic} having a ledger after the workload started")
        time.sleep(10)  # deliberate: ten seconds of traffic before the caller's operation
        yield workload
    finally:
        if workload.poll() is None:
            workload.kill()


@dataclass
class Recorded:
    """One workload recorded across several tests: each adds the window of its plays."""

    workload: subprocess.Popen
    topic: str
    run: Path
    windows: dict[str, tuple[int, int]]

    @contextmanager
    def window(self, name: str) -> Iterator[None]:
        t0 = time.time_ns()
        try:
            yield
        finally:
            self.windows[name] = (t0, time.time_ns())


def finish_workload(workload: subprocess.Popen, run: Path, windows: dict[str, tuple[int, int]], tmp_path: Path,
                    after: float = 10.0) -> None:
    """``after`` more seconds of traffic past the last window, then a Ctrl-C ends the send phase
    (consumers drain, storage is read back), then :func:`verify_windows`."""
    time.sleep(after)
    assert workload.poll() is None, f"the workload ended on its own before it was asked to: {workload.communicate()[0][-3000:]}"
    workload.send_signal(signal.SIGINT)
    out, _ = workload.communicate(timeout=600)
    assert workload.returncode == 0, out[-3000:]
    verify_windows(run, windows, tmp_path)


def verify_windows(run: Path, windows: dict[str, tuple[int, int]], tmp_path: Path) -> None:
    """``pulsarlab verify`` must pass: nothing acknowledged lost or stored twice, a redelivery after
    an ack allowed, and a message stored but never delivered allowed only if its send was never
    acknowledged: a send that timed out while its broker stopped can be stored by the ledger's
    recovery and then skipped by the subscription (seen on an upgrade under load; Pulsar's side, as
    in apache/pulsar#20968). Every acknowledged message must have been delivered, which this checks
    on the history itself. The workload must have outlasted every window; prints each window's
    longest time without an acknowledgement.

    A message stored twice is allowed only as a producer's resend to a topic its new owner had
    just loaded: both copies in different ledgers (a topic load always opens a new one). Pulsar 4.0.x
    can expose a loaded topic before its deduplication state is recovered (apache/pulsar#25954,
    fixed after 4.0.8 by #25953); the harness's CI saw 35 such copies over these runbooks. Two
    copies in one ledger would be deduplication failing without a reload: that still fails."""
    (tmp_path / "expect.json").write_text(json.dumps(
        {"allow": ["duplicated_delivery", "never_delivered", "duplicated_in_storage"]}))
    verify = subprocess.run([sys.executable, "-m", "pulsarlab.cli", "verify", str(run), "--expect", str(tmp_path / "expect.json"),
                             "--json"], capture_output=True, text=True, timeout=600)
    verdict = json.loads(verify.stdout)
    failed = {c["name"]: c.get("count") for c in verdict["checks"] if not c["passed"]}
    assert verify.returncode == 0 and verdict["status"] == "pass", (
        verdict["status"], verdict["reasons"], failed, verify.stderr[-2000:])
    assert not [c for c in verdict["checks"] if c["name"] == "lost" and c.get("count")]
    history = read_history(run)
    twice, one_ledger = stored_twice(history)
    assert not one_ledger, f"stored twice in one ledger (deduplication failed with no reload): {one_ledger[:20]}"
    if twice:
        print(f"stored twice, each copy in another ledger (a resend to a reloaded topic, apache/pulsar#25954): {twice}")
    acked_undelivered, unacked_undelivered = undelivered(history)
    assert not acked_undelivered, f"acknowledged, stored and never delivered: {sorted(acked_undelivered)[:20]}"
    if unacked_undelivered:
        print(f"stored though their sends were not acknowledged, and never delivered: {sorted(unacked_undelivered)[:20]}")

    sends = read_sends(run)
    last_ack = int(pc.max(sends.filter(pc.equal(sends["type"], "ok"))["ts"]).as_py())
    for name, (start, end) in windows.items():
        assert end < last_ack, f"the workload stopped before {name} ended: raise its duration"
        print(f"{name}: {(end - start) / 1e9:.1f}s, longest without an ack {longest_without_ack(sends, start, end):.2f}s")
    gap = verdict["metrics"]["longest_gap_without_ack_s"]["seconds"]
    redelivered = next(c.get("count") for c in verdict["checks"] if c["name"] == "duplicated_delivery")
    print(f"verdict {verdict['status']}; longest without an ack over the whole run {gap:.2f}s; "
          f"delivered again after an ack {redelivered}")


def stored_twice(history: pa.Table) -> tuple[int, list[tuple[str, int]]]:
    """How many messages storage holds more than once, and (producer, seq) of those with two
    copies in one ledger."""
    reads = history.filter(pc.equal(history["op"], "read"))
    ledgers: dict[tuple[str, int], list[str]] = {}
    for producer, seq, mid in zip(reads["producer"].to_pylist(), reads["seq"].to_pylist(),
                                  reads["message_id"].to_pylist(), strict=True):
        ledgers.setdefault((producer, seq), []).append(ledger_entry(mid)[0])
    twice = {k: v for k, v in ledgers.items() if len(v) > 1}
    return len(twice), sorted(k for k, v in twice.items() if len(set(v)) < len(v))


def undelivered(history: pa.Table) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(producer, seq) of the messages read back from storage that no consumer received: those
    whose send was acknowledged, and the others."""

    def keys(table) -> set[tuple[str, int]]:
        return set(zip(table["producer"].to_pylist(), table["seq"].to_pylist(), strict=True))

    op, kind = history["op"], history["type"]
    stored = keys(history.filter(pc.equal(op, "read")))
    received = keys(history.filter(pc.equal(op, "receive")))
    acked = keys(history.filter(pc.and_(pc.equal(op, "send"), pc.equal(kind, "ok"))))
    never = stored - received
    return never & acked, never - acked


def installed(deployed: Deployed, node: str) -> str:
    return docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node), "dpkg-query", "-W", "-f=${Package}\n").stdout


def ensemble_or_none(cluster: Endpoints, topic: str) -> list[str]:
    try:
        return targets.ensemble(cluster, topic)
    except PulsarlabError:  # not written to yet: the workload is still starting
        return []
