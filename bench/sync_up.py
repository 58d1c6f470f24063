"""Seconds from ``up --topology sync`` to ready AND configured, and the peak resident memory of its nodes.

Usage: python bench/sync_up.py [--topology sync] [--state-dir DIR] [--settle 10]

The pids come from the state directory (what pulsarlab started); their resident set sizes are
summed twice a second during ``up`` and for ``--settle`` seconds after it, and the peak is printed
with the targets (under 90 s, under 6 GiB). The cluster is stopped at the end, even on failure.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import psutil

from pulsarlab import ops
from pulsarlab.runtime.state import ClusterState

TARGET_SECONDS = 90.0
TARGET_GIB = 6.0


def rss_of_nodes(state_dir: Path) -> tuple[int, int]:
    """(bytes resident in every live node, number of nodes) right now."""
    state = ClusterState.load(state_dir)
    total, count = 0, 0
    for rec in (state.nodes.values() if state else []):
        p = rec.process()
        if p is None:
            continue
        try:
            total += p.memory_info().rss
            count += 1
        except psutil.Error:
            continue
    return total, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="sync")
    ap.add_argument("--state-dir", type=Path, default=None)
    ap.add_argument("--settle", type=float, default=10.0, help="seconds to keep sampling after up")
    args = ap.parse_args()
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="pulsarlab-bench-"))
    peak = {"bytes": 0, "nodes": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total, count = rss_of_nodes(state_dir)
            if total > peak["bytes"]:
                peak.update(bytes=total, nodes=count)
            stop.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        t0 = time.monotonic()
        result, cluster = ops.up(args.topology, state_dir=state_dir, say=lambda m: print(f"  {time.monotonic() - t0:5.1f}s {m}"))
        seconds = time.monotonic() - t0
        again = ops.configure(state_dir)
        time.sleep(args.settle)
        stop.set()
        sampler.join()
        gib = peak["bytes"] / 2**30
        print(f"topology {args.topology}: {len(cluster.topo.nodes)} nodes, Pulsar {cluster.state.version}")
        print(f"up -> ready and configured: {seconds:.1f} s (target < {TARGET_SECONDS:.0f} s, "
              f"{seconds / TARGET_SECONDS:.0%} of it)")
        print(f"peak resident memory of {peak['nodes']} nodes: {gib:.2f} GiB (target < {TARGET_GIB:.0f} GiB, "
              f"{gib / TARGET_GIB:.0%} of it)")
        print(f"second configure: {len(again.changes)} changes in {again.seconds:.2f} s")
    finally:
        stop.set()
        if ClusterState.path(state_dir).is_file():
            ops.down(state_dir)


if __name__ == "__main__":
    main()
