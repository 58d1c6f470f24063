"""How long ``pulsarlab report`` takes on a large history, and how big the page gets.

Histories come from :mod:`bench.history_gen` (two clusters, 8 producers, subscribe/send/receive/ack/
read/scan rows; about 5 rows per message). Its traffic runs at 100,000 msg/s, so 200,000 messages
last 2 s; ``--span-s`` stretches the send, receive and ack times (and publish times) so the run lasts
that long instead, which gives the plots as many points as a real run of that length.

Per size: the ``pulsarlab report`` command in a process of its own (wall time, peak RSS), then the
steps in this process (read, aggregate, render). Usage::

    python bench/report_scale.py [--messages 200000,1000000] [--span-s 3600] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import this checkout's packages, not installed ones
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.history_gen import T0, generate
from pulsarlab.history import part_files, write_table
from pulsarlab.report import load, render
from pulsarlab.report.aggregate import aggregate

ROOT = Path(__file__).resolve().parents[1]


def stretch(directory: Path, span_s: float) -> None:
    """Spread the run's send/receive/ack times over ``span_s`` seconds (reads and scans stay after them)."""
    parts = {p: pq.read_table(p) for p in part_files(directory)}
    live = [pc.is_in(t["op"], pa.array(["send", "receive", "ack"])) for t in parts.values()]
    last = max(pc.max(t["ts"].filter(m)).as_py() for t, m in zip(parts.values(), live, strict=True) if pc.any(m).as_py())
    factor = span_s * 1e9 / (last - T0)
    for (path, table), mask in zip(parts.items(), live, strict=True):
        for name in ("ts", "publish_ts"):
            offset = pc.multiply(pc.cast(pc.subtract(table[name], T0), pa.float64()), factor)
            moved = pc.add(pc.cast(pc.round(offset), pa.int64()), T0)
            table = table.set_column(table.schema.get_field_index(name), name, pc.if_else(mask, moved, table[name]))
        path.unlink()
        write_table(directory, path.stem, table)


def command(directory: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of ``pulsarlab report DIR``."""
    code = "from pulsarlab.cli import main; main()"
    start = time.monotonic()
    proc = psutil.Popen([sys.executable, "-c", code, "report", str(directory)], cwd=ROOT, stdout=subprocess.DEVNULL)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            try:
                peak = max(peak, proc.memory_info().rss)
            except psutil.Error:
                return
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    code_ = proc.wait()
    done.set()
    sampler.join()
    if code_ != 0:
        raise SystemExit(f"pulsarlab report {directory} exited {code_}")
    return time.monotonic() - start, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", default="200000,1000000", help="comma-separated message counts")
    ap.add_argument("--span-s", type=float, default=0, help="stretch each run over this many seconds (0: as generated)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="report-scale-"))
    print(f"{'messages':>10} {'rows':>10} {'plotted':>10} {'span s':>7} | {'command s':>9} {'peak MiB':>8} |"
          f" {'read s':>6} {'aggr s':>6} {'render s':>8} | {'page MiB':>8}")
    try:
        for n in (int(x) for x in args.messages.split(",")):
            d = work / f"h{n}"
            if not d.exists():
                generate(d, n)
                if args.span_s:
                    stretch(d, args.span_s)
            rows = sum(pq.ParquetFile(p).metadata.num_rows for p in part_files(d))
            seconds, peak = command(d)
            t = time.monotonic()
            run = load(d)
            t_read = time.monotonic() - t
            t = time.monotonic()
            agg = aggregate(run.events, run.started_ns)
            t_agg = time.monotonic() - t
            t = time.monotonic()
            render(run, agg)
            t_render = time.monotonic() - t
            span = (agg.end_ns - agg.t0_ns) / 1e9
            size = (d / "report.html").stat().st_size / 2**20
            print(f"{n:>10,} {rows:>10,} {run.events.num_rows:>10,} {span:>7.0f} | {seconds:>9.2f} {peak / 2**20:>8.0f} |"
                  f" {t_read:>6.2f} {t_agg:>6.2f} {t_render:>8.2f} | {size:>8.2f}", flush=True)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
