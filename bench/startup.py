"""Start-up benchmark: a pulsarlab cluster against ``pulsar standalone`` from the same distribution.

Brings up the ``smoke`` topology (5 JVMs: ZooKeeper, 3 bookies, a broker) with ``pulsarlab up`` and,
alternating with it, ``bin/pulsar standalone -nfw -nss`` (one JVM: no functions worker, no stream
storage) from the same resolved distribution, each to the same readiness: the admin API answers
``/admin/v2/brokers/health`` and a message is produced and consumed back. Prints every run, then
min/median of each and the ratio of the medians (smoke / standalone), with each side's peak
resident memory. ``--sync N`` and ``--geo N`` then bring ``sync`` and ``geo`` up N times each and
print their per-phase times (ZooKeeper, metadata, bookies, rack map, brokers, configure, first
message) with min/median, the goal and peak RSS.

``--cli`` times smoke the user's way instead: the installed ``pulsarlab up`` command, its own
Python start included, plus one more round trip.

Run: ``python bench/startup.py [--runs 3] [--sync 2] [--geo 2] [--prefix 127.0] [--cli]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: this checkout's bench and pulsarlab
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
import requests

from bench._topo import describe, jvm_setting, topology_at
from pulsarlab import distribution, ops
from pulsarlab.progress import Reporter
from pulsarlab.runtime.roundtrip import roundtrip
from pulsarlab.runtime.state import ClusterState
from pulsarlab.topology import Role, load

GIB = 1024**3
READY_TIMEOUT_S = 300.0


@dataclass
class Run:
    seconds: float
    peak_rss: int
    cpu_s: float  # CPU seconds the Pulsar JVMs used until ready (user + system)


class RssSampler:
    """Peak summed RSS of the processes ``pids()`` names, sampled at 5 Hz in a thread, and the CPU
    seconds each used (its last sample, the last one taken on exit)."""

    def __init__(self, pids: Callable[[], list[int]]) -> None:
        self.pids, self.peak, self._stop = pids, 0, threading.Event()
        self._cpu: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def cpu_s(self) -> float:
        return sum(self._cpu.values())

    def _sample(self) -> None:
        total = 0
        for pid in self.pids():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                total += proc.memory_info().rss
                t = proc.cpu_times()
                self._cpu[pid] = t.user + t.system
        self.peak = max(self.peak, total)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(0.2)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


class PhaseClock(Reporter):
    """Records when each progress step began and ended (monotonic seconds)."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    def begin(self, key: str, label: str, status: str = "", total: float | None = None, unit: str = "") -> None:
        self.began.setdefault(key, time.monotonic())

    def end(self, key: str, status: str = "done", ok: bool = True) -> None:
        self.ended.setdefault(key, time.monotonic())  # the first end: ``down`` reuses the node keys


def node_pids(state_dir: Path) -> list[int]:
    state = ClusterState.load(state_dir)
    return [r.pid for r in state.nodes.values()] if state else []


def up_once(topology: str, folder: Path, clock: Reporter | None = None) -> Run:
    """``pulsarlab up`` (ready, configured, a message round trip), timed; taken down afterwards."""
    state_dir = folder / f"state-{time.monotonic_ns()}"
    with RssSampler(lambda: node_pids(state_dir)) as rss:
        t0 = time.monotonic()
        _, cluster = ops.up(topology, state_dir=state_dir, say=clock or Reporter())
        seconds = time.monotonic() - t0
    cluster.down()
    return Run(seconds, rss.peak, rss.cpu_s)


def cli_up_once(topology: str, folder: Path) -> Run:
    """The user's way: the installed ``pulsarlab up --topology FILE`` (its own Python start
    included) and then one more message round trip from here, timed from the command's start;
    taken down afterwards with ``pulsarlab down``."""
    exe = Path(sys.executable).with_name("pulsarlab")
    if not exe.exists():
        raise SystemExit(f"--cli needs the pulsarlab command beside {sys.executable} (pip install -e .)")
    state_dir = folder / f"state-{time.monotonic_ns()}"
    with RssSampler(lambda: node_pids(state_dir)) as rss:
        t0 = time.monotonic()
        up = subprocess.run([str(exe), "up", "--topology", topology, "--state-dir", str(state_dir), "--quiet"],
                            capture_output=True, text=True, timeout=READY_TIMEOUT_S)
        if up.returncode:
            raise SystemExit(f"pulsarlab up failed (exit {up.returncode}):\n{up.stdout}{up.stderr}")
        cluster = load(str(state_dir / "topology.yaml"))
        name = cluster.clusters[0].name
        roundtrip(name, cluster.service_url(name), READY_TIMEOUT_S - (time.monotonic() - t0))
        seconds = time.monotonic() - t0
    subprocess.run([str(exe), "down", "--state-dir", str(state_dir)], capture_output=True, timeout=300)
    return Run(seconds, rss.peak, rss.cpu_s)


def standalone_once(home: Path, address: str, folder: Path) -> Run:
    """``bin/pulsar standalone -nfw -nss`` on ``address`` (its own data folder and ports), timed
    from the process start to the same readiness as a pulsarlab cluster; stopped by its pid."""
    work = Path(tempfile.mkdtemp(prefix="standalone-", dir=folder))
    conf = (home / "conf" / "standalone.conf").read_text()
    keys = {"bindAddress": address, "advertisedAddress": address, "brokerServicePort": "6650",
            "webServicePort": "8080", "clusterName": "standalone"}
    lines = [ln for ln in conf.splitlines() if ln.split("=", 1)[0] not in keys]
    (work / "standalone.conf").write_text("\n".join(lines + [f"{k}={v}" for k, v in keys.items()]) + "\n")
    env = {**os.environ, "PULSAR_STANDALONE_CONF": str(work / "standalone.conf"),
           "PULSAR_LOG_DIR": str(work / "logs")}
    cmd = [str(home / "bin" / "pulsar"), "standalone", "-nfw", "-nss", "--wipe-data",
           "--zookeeper-dir", str(work / "zk"), "--bookkeeper-dir", str(work / "bk"),
           "--metadata-dir", str(work / "metadata"), "--zookeeper-port", "22181", "--bookkeeper-port", "23181",
           "-a", address]
    t0 = time.monotonic()
    with open(work / "out.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with RssSampler(lambda: [proc.pid, *(c.pid for c in _children(proc.pid))]) as rss:
            health = f"http://{address}:8080/admin/v2/brokers/health"
            while True:
                if proc.poll() is not None or time.monotonic() - t0 > READY_TIMEOUT_S:
                    tail = (work / "out.log").read_text(errors="replace")[-3000:]
                    raise SystemExit(f"standalone did not get ready (exit {proc.returncode}):\n{tail}")
                with contextlib.suppress(requests.RequestException):
                    if requests.get(health, timeout=2).status_code == 200:
                        break
                time.sleep(0.2)
            roundtrip("standalone", f"pulsar://{address}:6650", READY_TIMEOUT_S - (time.monotonic() - t0))
            seconds = time.monotonic() - t0
        return Run(seconds, rss.peak, rss.cpu_s)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


def _children(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).children(recursive=True)
    return []


@dataclass
class Phases:
    spans: dict[str, list[float]] = field(default_factory=dict)

    def add(self, clock: PhaseClock, nodes_by_role: dict[Role, list[str]]) -> None:
        def span(keys: list[str]) -> float | None:
            begun = [clock.began[k] for k in keys if k in clock.began]
            ended = [clock.ended[k] for k in keys if k in clock.ended]
            return max(ended) - min(begun) if begun and ended else None

        groups = {
            "ZooKeeper": nodes_by_role[Role.ZOOKEEPER],
            "metadata init": [k for k in clock.began if k.startswith("init-")],
            "bookies": nodes_by_role[Role.BOOKIE] + [k for k in clock.began if k.startswith("writable-")],
            "rack map": ["racks"],
            "brokers": nodes_by_role[Role.BROKER],
            "configure": ["configure"],
            "first message": [k for k in clock.began if k.startswith("e2e-")],
        }
        for name, keys in groups.items():
            s = span(keys)
            if s is not None:
                self.spans.setdefault(name, []).append(s)


TARGET_S = {"sync": 10.0, "geo": 20.0}  # the goals for ready, configured and a first message


def phase_table(name: str, runs: int, topo_ref: str, folder: Path) -> None:
    """Bring ``topo_ref`` up ``runs`` times; print each run and the table of its phases."""
    topo = load(topo_ref)
    by_role = {r: [n.name for n in topo.nodes_of(r)] for r in Role}
    phases, totals, peaks, cpus = Phases(), [], [], []
    for i in range(runs):
        clock = PhaseClock()
        r = up_once(topo_ref, folder, clock)
        phases.add(clock, by_role)
        totals.append(r.seconds)
        peaks.append(r.peak_rss)
        cpus.append(r.cpu_s)
        print(f"{name} run {i + 1}: ready and configured in {r.seconds:.1f} s, peak RSS {r.peak_rss / GIB:.2f} GiB, "
              f"node JVMs' CPU {r.cpu_s:.1f} s", flush=True)
    print(f"\n{name + ' phase':20s}" + "   ".join(f"run {i + 1:d}" for i in range(runs)))
    for phase, values in phases.spans.items():
        print(f"  {phase:16s}  " + "   ".join(f"{v:5.1f}" for v in values))
    print(f"  {'total':16s}  " + "   ".join(f"{v:5.1f}" for v in totals)
          + f"     {fmt(totals)}; target <= {TARGET_S[name]:.1f} s; peak RSS {max(peaks) / GIB:.2f} GiB")
    # the JVMs start in parallel: no start can be quicker than their CPU seconds spread over every core
    cores = os.cpu_count() or 1
    print(f"  node JVMs' CPU to ready: median {statistics.median(cpus):.1f} s, i.e. at least "
          f"{statistics.median(cpus) / cores:.1f} s on {cores} cores\n")


def fmt(values: list[float]) -> str:
    return f"min {min(values):6.1f} s   median {statistics.median(values):6.1f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    ap.add_argument("--sync", type=int, default=1, help="runs of sync for the per-phase table (0: none)")
    ap.add_argument("--geo", type=int, default=0, help="runs of geo for the per-phase table (0: none)")
    ap.add_argument("--prefix", default="127.0", help="address range of the clusters (127.N)")
    ap.add_argument("--cli", action="store_true",
                    help="smoke through the installed pulsarlab command plus a round trip (as users time it)")
    ap.add_argument("--jvm", type=jvm_setting, action="append", default=[], metavar="KEY=VALUE",
                    help="a setting of the topology's jvm: section for both topologies, e.g. class_sharing=false")
    args = ap.parse_args()
    jvm = dict(args.jvm)
    print(f"jvm settings: {describe(jvm)}", flush=True)
    folder = Path(tempfile.mkdtemp(prefix="pulsarlab-bench-startup-"))
    home = distribution.resolve(None).home
    smoke, standalone = [], []
    try:
        for i in range(args.runs):
            for side in ("smoke", "standalone") if i % 2 == 0 else ("standalone", "smoke"):
                if side == "smoke":
                    ref = topology_at("smoke", args.prefix, folder, jvm)
                    r = cli_up_once(ref, folder) if args.cli else up_once(ref, folder)
                    smoke.append(r)
                else:
                    r = standalone_once(home, f"{args.prefix}.9.1", folder)
                    standalone.append(r)
                loadavg = os.getloadavg()[0]
                print(f"run {i + 1} {side:10s} ready in {r.seconds:6.1f} s   peak RSS {r.peak_rss / GIB:5.2f} GiB"
                      f"   CPU {r.cpu_s:5.1f} s   (load {loadavg:.1f})", flush=True)
        a, b = [r.seconds for r in smoke], [r.seconds for r in standalone]
        if a:
            label = "smoke (5 JVMs, CLI)" if args.cli else "smoke (5 JVMs)"
            print(f"\n{label:22s}{fmt(a)}   peak RSS {max(r.peak_rss for r in smoke) / GIB:.2f} GiB"
                  f"   CPU median {statistics.median(r.cpu_s for r in smoke):.1f} s")
            print(f"standalone (1 JVM)    {fmt(b)}   peak RSS {max(r.peak_rss for r in standalone) / GIB:.2f} GiB"
                  f"   CPU median {statistics.median(r.cpu_s for r in standalone):.1f} s")
            print(f"ratio smoke/standalone (medians) {statistics.median(a) / statistics.median(b):.2f}   target <= 1.00")

        for name, runs in (("sync", args.sync), ("geo", args.geo)):
            if runs:
                phase_table(name, runs, topology_at(name, args.prefix, folder, jvm), folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
