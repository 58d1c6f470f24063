"""Our recording producer against ``pulsar-perf produce`` on the same smoke cluster, in one run.

Same message size, same batching (5 ms window, up to 1000 messages, 4 MB, no compression), same
outstanding-message limit per producer (1000, blocking when full), the same number of producers
each (``--producers``, default 1: pulsar-perf ``-n N``; ours: N producer processes), unthrottled,
one after the other against the same topic namespace. Our producers also draw a key per message
(pulsar-perf sends unkeyed) and record two history rows per message. Each round prints both
message rates with the 1-minute load average next to each (the machine may be shared), then the
medians and their ratio (target: ours >= 0.8 of pulsar-perf, while recording every event).
Run: ``python bench/workload_vs_perf.py [--seconds 20] [--size 256] [--rounds 2] [--producers 1]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import uuid
from pathlib import Path

from pulsarlab import ops
from pulsarlab.workload.run import WorkloadConfig


def perf_rate(cluster, topic: str, seconds: int, size: int, batching: bool, producers: int = 1) -> float:
    dist = cluster.dist
    cmd = [str(dist.pulsar_perf), "produce", "-u", cluster.topo.service_url("smoke"), "-r", "10000000", "-s", str(size),
           "-n", str(producers), "-o", "1000", "-time", str(seconds), "-i", "5"]
    cmd += ["-b", "5", "-bm", "1000", "-bb", str(4 * 1024 * 1024)] if batching else ["-db"]
    env = dict(os.environ, PULSAR_MEM="-Xms64m -Xmx256m")
    if dist.java.home:
        env["JAVA_HOME"] = str(dist.java.home)
    proc = subprocess.run([*cmd, topic], capture_output=True, text=True, env=env, timeout=seconds + 120)
    text = proc.stdout + proc.stderr
    m = re.search(r"Aggregated throughput stats --- (\d+) records sent --- ([\d.,]+) msg/s", text)
    if not m:
        raise SystemExit(f"could not read pulsar-perf's result (exit {proc.returncode}):\n{text[-2000:]}")
    return float(m.group(2).replace(",", ""))


def ours_rate(cluster, topic: str, seconds: int, size: int, batching: bool, producers: int = 1) -> float:
    cfg = WorkloadConfig(topic, producers=producers, consumers=0, rate=0, message_size=size, duration=seconds,
                         batching=batching, max_pending=1000)
    out = Path(tempfile.mkdtemp(prefix="pulsarlab-wl-")) / "run"
    result = ops.workload_run(cluster.state_dir, cfg, out)
    return result.send_rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-batching", action="store_true")
    ap.add_argument("--producers", type=int, default=1, help="producers on each side (pulsar-perf -n; ours: processes)")
    ap.add_argument("--state-dir", type=Path, help="use this running smoke cluster instead of starting one")
    args = ap.parse_args()
    batching = not args.no_batching
    if args.state_dir:  # a smoke cluster that is already running: leave it running
        cluster = ops.open_cluster(args.state_dir)
    else:
        _, cluster = ops.up("smoke", state_dir=Path(tempfile.mkdtemp(prefix="pulsarlab-bench-")) / "smoke")
    try:
        cluster.distribution()
        perf, ours = [], []
        for r in range(args.rounds):
            run = (args.seconds, args.size, batching, args.producers)
            perf.append(perf_rate(cluster, f"persistent://public/default/perf-{uuid.uuid4().hex[:6]}", *run))
            perf_load = os.getloadavg()[0]
            ours.append(ours_rate(cluster, f"persistent://public/default/ours-{uuid.uuid4().hex[:6]}", *run))
            print(f"round {r + 1}: pulsar-perf {perf[-1]:10.0f} msg/s (load {perf_load:.1f})   "
                  f"pulsarlab {ours[-1]:10.0f} msg/s (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        if not args.state_dir:
            cluster.down()
    p, o = statistics.median(perf), statistics.median(ours)
    print(f"\nsize {args.size} B, batching {'on' if batching else 'off'}, {args.producers} producer(s) each, "
          f"{args.seconds} s x {args.rounds} rounds, median:")
    print(f"pulsar-perf produce      {p:10.0f} msg/s")
    print(f"pulsarlab workload       {o:10.0f} msg/s  (recording every event)")
    print(f"ratio pulsarlab/perf     {o / p:10.2f}   target >= 0.80")


if __name__ == "__main__":
    main()
