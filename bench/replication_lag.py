"""Geo-replication on ``geo``: the delay from an ack on one cluster to the first delivery on the
other at a steady rate, and how long the backlog of a cluster that was down takes to drain.

Usage::

    python bench/replication_lag.py [--rate 500] [--seconds 60] [--repeats 3] [--no-reverse]
                                    [--outage 60] [--drain-repeats 1] [--skip-steady] [--skip-drain]

The bench brings ``geo`` up itself under its own state directory, holding the cluster lock
(``/tmp/pulsarlab-cluster.lock``) for the whole run, and takes it down at the end, also on failure.

1. Steady rate: ``--repeats`` recorded workloads of ``--seconds`` at ``--rate`` msg/s, produced on
   ``cluster-eu`` and consumed on ``cluster-us`` (and, unless ``--no-reverse``, the other way round),
   each verified; the replication delay (the verifier's ``replication_delay_ms``: ack on the
   source -> first receive on the destination, exact nearest-rank percentiles) p50/p99/max of each
   run, then min and median over the runs.
2. Backlog drain (run first): a workload produces on ``cluster-eu`` (consumers on ``cluster-eu`` too) while
   every node of ``cluster-us`` (its brokers and bookies; the shared ZooKeeper lives in ``eu``) is
   stopped for ``--outage`` s, then started again (bookies, then brokers, each waited ready). The
   replicator eu -> us of the run's topic is polled (``pulsarlab inspect replication``) every
   ``--poll`` s: its peak backlog (entries) during the outage and the seconds from the first and
   from the last ``cluster-us`` broker ready again to a backlog of 0 with the replicator connected.
   The run is verified afterwards: ``not_replicated`` must be 0.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's pulsarlab, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pulsarlab import ops
from pulsarlab.admin import replication
from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.errors import PulsarlabError
from pulsarlab.runtime.state import ClusterState
from pulsarlab.topology import Role
from pulsarlab.workload.run import WorkloadConfig, WorkloadResult

LOCK = Path("/tmp/pulsarlab-cluster.lock")
EU, US = "cluster-eu", "cluster-us"
NAMESPACE = "persistent://world/global"
RUNNERS: list[threading.Thread] = []  # workloads in threads: waited for after the cluster is down, on failure too


@contextlib.contextmanager
def cluster_lock() -> Iterator[None]:
    """The lock every user of a real cluster on this machine takes turns on."""
    with LOCK.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for {LOCK} (another cluster user holds it) ...", flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass
class Lag:
    source: str
    destination: str
    acknowledged: int
    count: int
    p50: float
    p99: float
    max: float
    status: str


def steady(state_dir: Path, out: Path, source: str, destination: str, rate: float, seconds: float) -> Lag:
    """One run produced on ``source``, consumed on ``destination``, verified."""
    cfg = WorkloadConfig("", producers=1, consumers=1, rate=rate, duration=seconds)
    result = ops.workload_run(state_dir, cfg, out, source, consume_cluster=destination)
    verdict = ops.verify_history([out])
    delay = verdict.metrics["replication_delay_ms"].get(destination)
    if delay is None:
        raise SystemExit(f"no message acknowledged on {source} was received on {destination} "
                         f"({result.counters.acked} acknowledged; verdict {verdict.status}: {out}/verdict.json)")
    return Lag(source, destination, verdict.metrics["messages"]["acknowledged"], delay["count"], delay["p50"],
               delay["p99"], delay["max"], verdict.status)


@dataclass
class Drain:
    outage: float
    stop_seconds: float
    restart_seconds: float
    peak_backlog: int
    from_first_broker: float
    from_all_brokers: float
    acknowledged: int
    not_replicated: int
    status: str


def eu_to_us(cluster: Endpoints, topic: str) -> replication.Direction | None:
    found = [d for d in replication.inspect(cluster, topic).directions if d.source == EU and d.destination == US]
    return found[0] if found else None


def wait_for(what: str, check, timeout: float, poll: float):  # type: ignore[no-untyped-def]
    """Poll ``check()`` until it returns something true; SystemExit naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)


def start_together(cluster: NodeControl, names: list[str]) -> list[float]:
    """Start nodes at once, each waited ready; when each was ready (monotonic seconds)."""
    def start(name: str) -> float:
        cluster.start_node(name)
        return time.monotonic()

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        return list(pool.map(start, names))


def drain(cluster: NodeControl, out: Path, rate: float, outage: float, warmup: float, tail: float, poll: float,
          timeout: float) -> Drain:
    """A producer on cluster-eu; every cluster-us node down ``outage`` s; the eu -> us backlog's drain."""
    topic = f"{NAMESPACE}/replag-drain-{uuid.uuid4().hex[:8]}"
    cfg = WorkloadConfig(topic, producers=1, consumers=1, rate=rate, duration=warmup + outage + tail + 60)
    us_nodes = [n for n in cluster.topo.nodes if n.cluster == US]
    brokers = [n.name for n in us_nodes if n.role == Role.BROKER]
    bookies = [n.name for n in us_nodes if n.role == Role.BOOKIE]
    done: dict[str, WorkloadResult | BaseException] = {}

    def work() -> None:
        try:
            done["result"] = ops.workload_run(cluster.state_dir, cfg, out, EU, replication_timeout=timeout)
        except BaseException as exc:  # handed to the main thread
            done["result"] = exc

    runner = threading.Thread(target=work, name="drain-workload", daemon=True)
    RUNNERS.append(runner)
    runner.start()

    def flowing() -> bool:
        if "result" in done:
            raise SystemExit(f"the drain workload ended before the outage: {done['result']}")
        with contextlib.suppress(Exception):  # the topic may not exist yet
            d = eu_to_us(cluster, topic)
            return d is not None and d.connected and (d.rate_out or 0) > 0
        return False

    wait_for(f"the replicator {EU} -> {US} of {topic} to carry messages", flowing, 180, poll)
    time.sleep(warmup)
    t0 = time.monotonic()
    for name in brokers + bookies:
        cluster.stop_node(name)
    stopped = time.monotonic()
    peak = 0
    while time.monotonic() < stopped + outage:
        with contextlib.suppress(Exception):
            d = eu_to_us(cluster, topic)
            if d is not None and d.backlog is not None:
                peak = max(peak, d.backlog)
        time.sleep(poll)
    restart = time.monotonic()
    start_together(cluster, bookies)  # one at a time, the first would wait for an ensemble of writable bookies
    ready_at = start_together(cluster, brokers)
    first_ready, ready = min(ready_at), max(ready_at)

    def drained() -> bool:
        with contextlib.suppress(Exception):  # a broker still loading the topic
            d = eu_to_us(cluster, topic)
            return d is not None and d.connected and d.backlog == 0
        return False

    wait_for(f"the backlog {EU} -> {US} of {topic} to reach 0", drained, timeout, poll)
    empty = time.monotonic()
    runner.join(timeout=cfg.duration + timeout + 600)
    result = done.get("result")
    if not isinstance(result, WorkloadResult):
        raise SystemExit(f"the drain workload failed: {result!r}")
    verdict = ops.verify_history([out])
    return Drain(outage, stopped - t0, ready - restart, peak, empty - first_ready, empty - ready,
                 verdict.metrics["messages"]["acknowledged"], verdict.check("not_replicated").count, verdict.status)


def spread(values: list[float]) -> str:
    return f"min {min(values):9.3f}  median {statistics.median(values):9.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=500.0, help="messages/s of every run")
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each steady-rate run")
    ap.add_argument("--repeats", type=int, default=3, help="steady-rate runs per direction")
    ap.add_argument("--no-reverse", action="store_true", help="steady rate eu -> us only (not also us -> eu)")
    ap.add_argument("--outage", type=float, default=60.0, help="seconds every cluster-us node stays down")
    ap.add_argument("--drain-repeats", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds of replication before the outage")
    ap.add_argument("--tail", type=float, default=30.0, help="production goes on this long after the outage (+60 s)")
    ap.add_argument("--poll", type=float, default=0.5, help="seconds between replicator polls")
    ap.add_argument("--drain-timeout", type=float, default=600.0)
    ap.add_argument("--skip-steady", action="store_true")
    ap.add_argument("--skip-drain", action="store_true")
    ap.add_argument("--keep-histories", action="store_true", help="leave the run folders (their path is printed)")
    args = ap.parse_args()
    if args.rate <= 0 or args.seconds <= 0 or args.outage <= 0 or args.repeats < 1 or args.drain_repeats < 1:
        ap.error("need --rate, --seconds, --outage > 0 and --repeats, --drain-repeats >= 1")
    root = Path(tempfile.mkdtemp(prefix="replag-bench-"))
    state_dir = root / "geo"
    lags: list[Lag] = []
    drains: list[Drain] = []
    with cluster_lock():
        try:
            t0 = time.monotonic()
            _, cluster = ops.up("geo", state_dir=state_dir)
            print(f"geo up and configured in {time.monotonic() - t0:.1f} s (state {state_dir})", flush=True)
            for r in range(args.drain_repeats if not args.skip_drain else 0):
                d = drain(cluster, root / f"drain-{r + 1}", args.rate, args.outage, args.warmup, args.tail, args.poll,
                          args.drain_timeout)
                drains.append(d)
                print(f"drain run {r + 1}: {d}", flush=True)
            directions = [(EU, US)] + ([] if args.no_reverse else [(US, EU)])
            for r in range(args.repeats if not args.skip_steady else 0):
                for source, dest in directions:
                    x = steady(state_dir, root / f"steady-{source}-{r + 1}", source, dest, args.rate, args.seconds)
                    lags.append(x)
                    print(f"steady {source} -> {dest} run {r + 1}: {x.acknowledged:,} acknowledged, {x.count:,} delivered on "
                          f"{dest}; replication delay p50 {x.p50:.3f} ms, p99 {x.p99:.3f} ms, max {x.max:.3f} ms "
                          f"(verdict {x.status})", flush=True)
        except PulsarlabError as exc:  # a node that did not come back, a workload that could not start: one message
            raise SystemExit(f"replication_lag: {exc} (run folder: {root})") from None
        finally:
            if ClusterState.path(state_dir).is_file():
                ops.down(state_dir)
            for runner in RUNNERS:  # its drivers fail fast once the cluster is gone, and stop their processes
                runner.join(timeout=300)
    if not args.keep_histories:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"histories in {root}")
    if lags:
        print(f"\nreplication delay at {args.rate:g} msg/s, {args.seconds:g} s runs, {args.repeats} per direction "
              "(ack on the source -> first receive on the destination, ms):")
        for source, dest in dict.fromkeys((x.source, x.destination) for x in lags):
            mine = [x for x in lags if (x.source, x.destination) == (source, dest)]
            for name in ("p50", "p99", "max"):
                print(f"  {source} -> {dest}  {name:4} {spread([getattr(x, name) for x in mine])}")
    if drains:
        print(f"\nbacklog drain: producing {args.rate:g} msg/s on {EU}, every {US} node stopped {args.outage:g} s:")
        print(f"  {'run':>3} {'stop s':>7} {'restart s':>9} {'peak backlog':>12} {'drain s (1st broker)':>20} "
              f"{'drain s (all brokers)':>21} {'acknowledged':>12} {'not_replicated':>14} verdict")
        for i, d in enumerate(drains, 1):
            print(f"  {i:>3} {d.stop_seconds:7.1f} {d.restart_seconds:9.1f} {d.peak_backlog:>12,} {d.from_first_broker:20.1f} "
                  f"{d.from_all_brokers:21.1f} {d.acknowledged:>12,} {d.not_replicated:>14} {d.status}")
        if len(drains) > 1:
            print(f"  drain s (all brokers): {spread([d.from_all_brokers for d in drains])}")


if __name__ == "__main__":
    main()
