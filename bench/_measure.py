"""Shared benchmark plumbing: run ``pulsarlab up`` and sample the nodes' resident memory meanwhile."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass
class UpMeasure:
    seconds: float
    peak_rss_bytes: int
    settled_rss_bytes: int
    nodes: int


def _node_pids(state_dir: Path) -> list[int]:
    try:
        data = json.loads((state_dir / "state.json").read_text())
    except (OSError, ValueError):
        return []
    return [rec["pid"] for rec in data.get("nodes", {}).values()]


def _rss(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total


def measure_up(topology: str, state_dir: Path, settle: float = 10.0) -> UpMeasure:
    """Seconds from ``pulsarlab up`` to its exit (ready), and peak RSS of all nodes, sampled at 5 Hz."""
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _rss(_node_pids(state_dir)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pulsarlab.cli", "up", "--topology", topology, "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        stop.set()
        raise SystemExit(f"pulsarlab up failed:\n{proc.stderr[-3000:]}")
    time.sleep(settle)  # memory keeps growing for a while after ready
    stop.set()
    sampler.join()
    pids = _node_pids(state_dir)
    return UpMeasure(seconds, peak, _rss(pids), len(pids))


def down(state_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "pulsarlab.cli", "down", "--state-dir", str(state_dir)], check=False)
