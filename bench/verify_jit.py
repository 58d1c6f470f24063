"""The verifier's Spark driver with C1 alone (``quick_jit``) against the full JIT, per history size:
wall time and CPU seconds of the whole process tree (the Spark JVM included), from the process's
start to its end, as a user's ``pulsarlab verify`` pays them. It decided that the verifier's
driver runs C1 alone at every size (``quick_jit`` in ``pulsarlab.verify.session``).

Each size's history comes from :mod:`bench.history_gen` (every presence anomaly planted); each run
is a process of its own, the two settings alternating, after one warm-up run that is not counted
(it leaves the driver's class archive in place). Prints min / median of each and the ratios of the
medians quick/full. Usage::

    python bench/verify_jit.py --sizes 30000,300000,1000000 --repeats 3 [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's packages, not installed ones
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from bench.history_gen import EVIDENCE, KINDS, generate

HERE = Path(__file__).resolve()
SETTINGS = {"quick": True, "full": False}


def worker(setting: str, directory: str) -> None:
    from pulsarlab.verify import spark_session, verify

    spark_session(quick_jit=SETTINGS[setting])  # verify() below runs in this session
    print(json.dumps({"status": verify(directory).status}))


def measured(setting: str, directory: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the process tree, and the verdict's status of one worker."""
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, str(HERE), "--worker", setting, str(directory)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    root, cpu = psutil.Process(child.pid), {}
    while child.poll() is None:
        with contextlib.suppress(psutil.Error):
            for p in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = p.cpu_times()
                    cpu[(p.pid, p.create_time())] = t.user + t.system
        time.sleep(0.1)
    wall = time.monotonic() - started
    out = child.stdout.read() if child.stdout else ""
    if child.returncode:
        raise SystemExit(f"the {setting} worker on {directory} failed ({child.returncode})")
    return wall, sum(cpu.values()), json.loads(out.strip().splitlines()[-1])["status"]


def _mm(runs: list[tuple[float, float]], i: int) -> str:
    xs = [r[i] for r in runs]
    return f"{min(xs):.1f} / {statistics.median(xs):.1f}"


def _ratio(runs: dict[str, list[tuple[float, float]]], i: int) -> str:
    return f"{statistics.median(r[i] for r in runs['quick']) / statistics.median(r[i] for r in runs['full']):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30000,300000,1000000", help="comma-separated message counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, help="where histories go (default: a temp dir, removed); reused")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker)
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pulsarlab-bench-"))
    console = Console(width=200)
    table = Table(title=f"verify, C1 alone (quick) against the full JIT (full): min / median of {args.repeats} runs")
    for col in ("messages", "history rows", "quick wall s", "full wall s", "quick CPU s", "full CPU s",
                "wall quick/full", "CPU quick/full"):
        table.add_column(col, justify="right")
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            directory = workdir / f"run-{n}"
            if not (directory / "_run.json").exists():
                generate(directory, n, frozenset(KINDS) - EVIDENCE)
            rows = sum(pq.read_metadata(p).num_rows for p in directory.glob("*.parquet"))
            measured("quick", directory)  # warm-up: the page cache, the class archive
            runs: dict[str, list[tuple[float, float]]] = {s: [] for s in SETTINGS}
            for _ in range(args.repeats):
                for s in SETTINGS:
                    wall, cpu, status = measured(s, directory)
                    runs[s].append((wall, cpu))
                    console.print(f"{n:,} messages, {s}: {wall:.1f} s wall, {cpu:.1f} s CPU, {status}")

            table.add_row(f"{n:,}", f"{rows:,}", _mm(runs["quick"], 0), _mm(runs["full"], 0), _mm(runs["quick"], 1),
                          _mm(runs["full"], 1), _ratio(runs, 0), _ratio(runs, 1))
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    console.print(table)


if __name__ == "__main__":
    main()
