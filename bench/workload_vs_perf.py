"""Our recording producer against ``pulsar-perf produce``, like for like, on one smoke cluster.

Both sides get the same settings: message size, batching (5 ms window, up to 1000 messages,
4 MiB; or none with ``--no-batching``), no compression, 1000 outstanding messages per producer
(blocking when full), a 30 s send timeout, keyed messages (ours: 100 keys; pulsar-perf ``-mk
random``), the same topic layout (``--partitions``, created beforehand through the admin API on
both sides), ``--producers`` producers each (ours: one JVM each; pulsar-perf: ``-n`` in one JVM),
the same garbage collector (pulsar-perf gets a 1 GiB heap, our drivers 256 MiB: its latency
histograms alone outgrow 512 MiB), no consumer on either side (produce only; each topic holds one
durable subscription at the earliest position so nothing is trimmed before it is measured), and
no rate limit. pulsar-perf
4.0.8 refuses ``-r 0`` (its rate limiter needs a positive rate), so it gets ``-r 1000000000``,
a rate it never reaches.

Time base: first send to last acknowledgement, on both sides.

- ours: read from the run's history: acknowledged sends over first ``invoke`` to last ``ok``;
- pulsar-perf: its own count of acknowledged messages over (first message's publish time in
  storage) to (last message's publish time in storage + pulsar-perf's own median publish
  latency, which estimates when that last message was acknowledged). Publish times have
  millisecond resolution and, in a batch, are its first message's; over a 20 s run this moves
  the figure by well under 1 %.

The same storage-based span (first to last publish time, no latency added) is also printed for
both sides as a cross-check of the two time bases, as is pulsar-perf's own "Aggregated
throughput" figure, which is *not* comparable: its clock starts before the client connects and
stops at the next 10 s tick of its stats loop after the test ends.

Rounds alternate (ours, perf, ours, perf, ...) on fresh topics; the end prints min and median
of each side and the ratio of the medians. Run::

    python bench/workload_vs_perf.py [--seconds 20] [--size 256] [--rounds 3] [--producers 1] [--partitions 0]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's pulsarlab, not an installed one
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pulsar
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench._topo import describe, jvm_setting, topology_at
from pulsarlab import ops
from pulsarlab.deployment import Endpoints
from pulsarlab.history import SCHEMA, part_files
from pulsarlab.security import client as pulsar_client
from pulsarlab.workload.audit import audit_subscription
from pulsarlab.workload.run import WorkloadConfig

MAX_PENDING = 1000
SEND_TIMEOUT_S = 30
UNTHROTTLED = 1_000_000_000  # msg/s: pulsar-perf's "no limit"
PERF_JVM = "-Xms64m -Xmx1g -XX:+UseParallelGC"  # our drivers' collector; its histograms need more than 512 MiB of heap


@dataclass
class Settings:
    seconds: int
    size: int
    batching: bool
    producers: int
    partitions: int


@dataclass
class Sample:
    messages: int  # acknowledged sends
    seconds: float  # first send to last acknowledgement
    storage_seconds: float  # first to last publish time in storage (same method on both sides)
    reported: float | None = None  # the tool's own msg/s, where it prints one

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def storage_rate(self) -> float:
        return self.messages / max(self.storage_seconds, 1e-3)


def partitions_of(topic: str, partitions: int) -> list[str]:
    return [f"{topic}-partition-{i}" for i in range(partitions)] or [topic]


def storage_span_ms(service_url: str, topic: str, partitions: int) -> tuple[int, int]:
    """Publish time (ms) of the first and of the last message stored, over all partitions."""
    c = pulsar_client(service_url)
    first, last = [], []
    try:
        for t in partitions_of(topic, partitions):
            for start, into in ((pulsar.MessageId.earliest, first), (pulsar.MessageId.latest, last)):
                reader = c.create_reader(t, start, start_message_id_inclusive=True)
                try:
                    if reader.has_message_available():
                        into.append(reader.read_next(timeout_millis=30_000).publish_timestamp())
                finally:
                    reader.close()
    finally:
        c.close()
    if not first:
        raise SystemExit(f"nothing stored on {topic}")
    return min(first), max(last)


def run_ours(cluster: Endpoints, topic: str, s: Settings) -> Sample:
    cfg = WorkloadConfig(topic, partitions=s.partitions, producers=s.producers, consumers=0, rate=0, message_size=s.size,
                         duration=s.seconds, batching=s.batching, max_pending=MAX_PENDING, send_timeout_ms=SEND_TIMEOUT_S * 1000)
    out = Path(tempfile.mkdtemp(prefix="pulsarlab-wl-")) / "run"
    result = ops.workload_run(cluster.state_dir, cfg, out)
    sends = ds.dataset([str(p) for p in part_files(out)], schema=SCHEMA, format="parquet").to_table(
        ["type", "ts"], filter=pc.field("op") == "send")
    invoked = sends.filter(pc.equal(sends["type"], "invoke"))["ts"]
    acked = sends.filter(pc.equal(sends["type"], "ok"))["ts"]
    if len(acked) == 0:
        raise SystemExit(f"our run acknowledged nothing; see {out}")
    seconds = (pc.max(acked).as_py() - pc.min(invoked).as_py()) / 1e9
    first, last = storage_span_ms(ops.workload_target(cluster, None, None).service_url, topic, s.partitions)
    return Sample(len(acked), seconds, (last - first) / 1e3, getattr(result, "send_rate", None))


def run_perf(cluster: Endpoints, topic: str, s: Settings) -> Sample:
    target = ops.workload_target(cluster, None, None)
    ops.prepare_topic(cluster, target, WorkloadConfig(topic, partitions=s.partitions))
    dist = cluster.distribution()
    cmd = [str(dist.pulsar_perf), "produce", "-u", target.service_url, "-r", str(UNTHROTTLED), "-s", str(s.size),
           "-n", str(s.producers), "-o", str(MAX_PENDING), "--send-timeout", str(SEND_TIMEOUT_S), "-mk", "random",
           "-z", "NONE", "-time", str(s.seconds)]
    cmd += ["-b", "5", "-bm", "1000", "-bb", str(4 * 1024 * 1024)] if s.batching else ["-db"]
    env = dict(os.environ, PULSAR_EXTRA_OPTS=PERF_JVM)
    if dist.java.home:
        env["JAVA_HOME"] = str(dist.java.home)
    with audit_subscription(target.service_url, topic):
        proc = subprocess.run([*cmd, topic], capture_output=True, text=True, env=env, timeout=s.seconds + 180)
        text = proc.stdout + proc.stderr
        sent = re.search(r"Aggregated throughput stats --- ([\d,]+) records sent --- ([\d.,]+) msg/s", text)
        latency = re.search(r"Aggregated latency stats --- Latency: mean: +[\d.]+ ms - med: +([\d.]+)", text)
        if not (sent and latency) or int(sent.group(1).replace(",", "")) == 0:
            log = Path(tempfile.mkdtemp(prefix="pulsarlab-perf-")) / "pulsar-perf.log"
            log.write_text(f"{' '.join(cmd)} {topic}\n{text}")
            raise SystemExit(f"pulsar-perf sent nothing or printed no result (exit {proc.returncode}; all output in {log}):\n"
                             f"{text[-2000:]}")
        first, last = storage_span_ms(target.service_url, topic, s.partitions)
    messages = int(sent.group(1).replace(",", ""))
    seconds = (last - first) / 1e3 + float(latency.group(1)) / 1e3
    return Sample(messages, seconds, (last - first) / 1e3, float(sent.group(2).replace(",", "")))


def summary(name: str, samples: list[Sample]) -> str:
    rates = [x.rate for x in samples]
    return (f"{name:12} min {min(rates):10,.0f}  median {statistics.median(rates):10,.0f} msg/s   "
            f"(storage span median {statistics.median(x.storage_rate for x in samples):10,.0f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3, help="repetitions of each side, alternating")
    ap.add_argument("--no-batching", action="store_true")
    ap.add_argument("--producers", type=int, default=1, help="producers on each side (pulsar-perf -n; ours: processes)")
    ap.add_argument("--partitions", type=int, default=0, help="0: a non-partitioned topic")
    ap.add_argument("--state-dir", type=Path, help="use this running smoke cluster instead of starting one")
    ap.add_argument("--jvm", type=jvm_setting, action="append", default=[], metavar="KEY=VALUE",
                    help="instead: pulsar-perf on a smoke cluster with this jvm: setting against one with the "
                         "defaults, both up, alternating rounds (e.g. fast_start=false: what C1-only costs)")
    ap.add_argument("--prefix", default="127.0", help="with --jvm: the defaults' address range (the other: 127.N+1)")
    args = ap.parse_args()
    s = Settings(args.seconds, args.size, not args.no_batching, args.producers, args.partitions)
    if args.jvm:
        compare_jvm(dict(args.jvm), s, args.rounds, args.prefix)
        return
    if args.state_dir:  # a smoke cluster that is already running: leave it running
        cluster = ops.open_cluster(args.state_dir)
    else:
        _, cluster = ops.up("smoke", state_dir=Path(tempfile.mkdtemp(prefix="pulsarlab-bench-")) / "smoke")
    ours: list[Sample] = []
    perf: list[Sample] = []
    try:
        ns = ops.default_topic(cluster, ops.workload_target(cluster, None, None).cluster, "bench").rsplit("/", 1)[0]
        for r in range(args.rounds):
            for name, run, into in (("pulsarlab", run_ours, ours), ("pulsar-perf", run_perf, perf)):
                x = run(cluster, f"{ns}/bench-{name}-{uuid.uuid4().hex[:6]}", s)
                into.append(x)
                own = f", its own figure {x.reported:,.0f}" if x.reported is not None else ""
                print(f"round {r + 1} {name:11}: {x.messages:>9,} msgs in {x.seconds:6.2f} s = {x.rate:10,.0f} msg/s "
                      f"(storage span {x.storage_rate:10,.0f}{own}; load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        if not args.state_dir:
            cluster.down()
    print(f"\n{s.size} B, batching {'on' if s.batching else 'off'}, {s.producers} producer(s) each, "
          f"{s.partitions or 'no'} partitions, {s.seconds} s x {args.rounds} alternating rounds, first send to last ack:")
    print(summary("pulsarlab", ours))
    print(summary("pulsar-perf", perf))
    o, p = statistics.median(x.rate for x in ours), statistics.median(x.rate for x in perf)
    print(f"ratio of medians pulsarlab/pulsar-perf: {o / p:.2f} (target >= 0.80)")


def compare_jvm(jvm: dict[str, object], s: Settings, rounds: int, prefix: str) -> None:
    """pulsar-perf's throughput on two smoke clusters that differ only in ``jvm`` settings."""
    folder = Path(tempfile.mkdtemp(prefix="pulsarlab-bench-jvm-"))
    other = f"127.{int(prefix.split('.')[1]) + 1}"
    sides = {"defaults": (prefix, {}), "changed": (other, jvm)}
    clusters: dict[str, Endpoints] = {}
    samples: dict[str, list[Sample]] = {name: [] for name in sides}
    try:
        for name, (pfx, settings) in sides.items():
            result, clusters[name] = ops.up(topology_at("smoke", pfx, folder, settings), state_dir=folder / name)
            print(f"{name:8}: {describe(settings)}\n          up in {result.seconds:.1f} s", flush=True)
        for r in range(rounds):
            for name in list(sides) if r % 2 == 0 else list(reversed(sides)):
                cluster = clusters[name]
                ns = ops.default_topic(cluster, ops.workload_target(cluster, None, None).cluster, "bench").rsplit("/", 1)[0]
                x = run_perf(cluster, f"{ns}/bench-{name}-{uuid.uuid4().hex[:6]}", s)
                samples[name].append(x)
                print(f"round {r + 1} {name:8}: {x.messages:>9,} msgs in {x.seconds:6.2f} s = {x.rate:10,.0f} msg/s "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        for cluster in clusters.values():
            cluster.down()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\npulsar-perf produce, {s.size} B, batching {'on' if s.batching else 'off'}, {s.seconds} s x {rounds} rounds:")
    for name in sides:
        print(summary(name, samples[name]))
    d, c = (statistics.median(x.rate for x in samples[n]) for n in sides)
    print(f"ratio of medians changed/defaults: {c / d:.2f}")


if __name__ == "__main__":
    main()
