"""Startup benchmark for the smoke topology: seconds from ``up`` to ready, peak RSS of all nodes.

Targets: ready in under 30 s, under 2.5 GiB. Prints each figure next to its target and the ratio.
Run: ``python bench/startup.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from _measure import down, measure_up

GIB = 1024**3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--topology", default="smoke")
    ap.add_argument("--target-seconds", type=float, default=30.0)
    ap.add_argument("--target-gib", type=float, default=2.5)
    args = ap.parse_args()
    results = []
    for i in range(args.runs):
        state = Path(tempfile.mkdtemp(prefix="pulsarlab-bench-")) / args.topology
        try:
            m = measure_up(args.topology, state)
        finally:
            down(state)
        results.append(m)
        print(f"run {i + 1}: ready in {m.seconds:.1f} s, peak RSS {m.peak_rss_bytes / GIB:.2f} GiB over {m.nodes} nodes")
    secs = statistics.median(m.seconds for m in results)
    peak = max(m.peak_rss_bytes for m in results) / GIB
    t_s, t_g = args.target_seconds, args.target_gib
    print(f"\n{args.topology}: up -> ready      {secs:6.1f} s    target {t_s:5.1f} s   ratio {secs / t_s:.2f}")
    print(f"{args.topology}: peak RSS (nodes) {peak:6.2f} GiB  target {t_g:5.2f} GiB ratio {peak / t_g:.2f}")


if __name__ == "__main__":
    main()
