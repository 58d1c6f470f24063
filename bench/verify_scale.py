"""How fast is ``pulsarlab verify`` at scale, next to a plain single-process checker?

Generates synthetic histories (send invoke+ok, receive, ack and read rows: five rows per
message) with a few planted anomalies, then times the Spark verifier and
``bench/reference_checker.py`` on each, every one in its own process so peak RSS (whole process
tree, Spark JVM included) is sampled cleanly with psutil. Usage::

    python bench/verify_scale.py --sizes 1000000,10000000 [--workdir DIR] [--keep] [--reuse]

``--reuse`` verifies histories already in ``--workdir`` (kept by an earlier ``--keep`` run) instead
of generating them again.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

from pulsarlab.history import conform, write_table

PRODUCERS = 8  # powers of two: index arithmetic is shifts and masks
CONSUMERS = 4
KEYS = 128
T0 = 1_700_000_000_000_000_000
RATE = 100_000  # messages per second the synthetic run produced
TOPIC = "persistent://public/default/bench"
HERE = Path(__file__).resolve().parent
LOST = [11, 222_222, 777_777]  # acknowledged, not stored
NEVER_DELIVERED = [5, 333_333]  # stored, not received
PLANTED = {"lost": len(LOST), "never_delivered": len(NEVER_DELIVERED)}


def _const(n: int, value: str) -> pa.Array:
    return pc.fill_null(pa.nulls(n, pa.string()), value)


def _int(x: pa.Array | int) -> pa.Array:
    return pc.cast(x, pa.int64())


def generate(directory: Path, n: int) -> None:
    """Write a history of ``n`` messages; vectorised, no Python loop over messages."""
    k = pa.array(range(n), pa.int64())
    producer = pc.take(pa.array([f"producer-{i}" for i in range(PRODUCERS)]), pc.bit_wise_and(k, PRODUCERS - 1))
    seq = pc.shift_right(k, PRODUCERS.bit_length() - 1)
    key = pc.take(pa.array([f"key-{i}" for i in range(KEYS)]), pc.bit_wise_and(seq, KEYS - 1))
    ledger, entry = pc.add(pc.shift_right(k, 16), 1000), pc.bit_wise_and(k, 0xFFFF)
    mid = pc.binary_join_element_wise(pc.cast(ledger, pa.string()), pc.cast(entry, pa.string()), "-1", "-1", ":")
    invoke_ts = pc.add(pc.multiply(k, 1_000_000_000 // RATE), T0)
    jitter = pc.bit_wise_and(pc.multiply(k, 2_654_435_761), 0x3FFFFF)  # 0..4.2 ms
    ok_ts = pc.add(invoke_ts, pc.add(jitter, 2_000_000))
    recv_ts = pc.add(ok_ts, pc.add(pc.shift_right(jitter, 1), 1_000_000))
    ack_ts = pc.add(recv_ts, 200_000)
    common = {"producer": producer, "seq": seq, "key": key, "topic": _const(n, TOPIC), "cluster": _const(n, "c1")}

    def rows(op: str, ts: pa.Array, **extra: pa.Array) -> dict[str, pa.Array]:
        return {"op": _const(n, op), "ts": ts, **common, **extra}

    sends = [
        conform(pa.table(rows("send", invoke_ts, type=_const(n, "invoke")))),
        conform(pa.table(rows("send", ok_ts, type=_const(n, "ok"), message_id=mid))),
    ]
    pidx = pc.bit_wise_and(k, PRODUCERS - 1)
    for p in range(PRODUCERS):
        write_table(directory, f"producer-{p}", pa.concat_tables([t.filter(pc.equal(pidx, p)) for t in sends]))
    delivery = {"message_id": mid, "subscription": _const(n, "sub"), "publish_ts": invoke_ts}
    consumer = pc.bit_wise_and(pc.bit_wise_and(seq, KEYS - 1), CONSUMERS - 1)
    cname = pc.take(pa.array([f"consumer-{i}" for i in range(CONSUMERS)]), consumer)
    received = pc.invert(pc.is_in(k, pa.array(NEVER_DELIVERED, pa.int64())))
    zero = pc.cast(pc.multiply(k, 0), pa.int32())
    recv = conform(pa.table(rows("receive", recv_ts, consumer=cname, redelivery_count=zero, **delivery)))
    ack = conform(pa.table(rows("ack", ack_ts, consumer=cname, **delivery)))
    for c in range(CONSUMERS):
        mine = pc.and_(pc.equal(consumer, c), received)
        write_table(directory, f"consumer-{c}", pa.concat_tables([recv.filter(mine), ack.filter(mine)]))
    stored = pc.invert(pc.is_in(k, pa.array(LOST, pa.int64())))
    read = pa.table(rows("read", pc.add(k, T0 + 10**12), message_id=mid, read_index=k)).filter(stored)
    write_table(directory, "read-c1", read)


@dataclass
class Measured:
    seconds: float
    wall: float
    peak_rss_mib: float
    counts: dict[str, int]


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # a child (a Python worker) ended while the tree was listed: try again next tick
        return 0
    for p in tree:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def measure(argv: list[str]) -> Measured:
    """Run a worker process, sampling its process tree's RSS every 100 ms."""
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc, peak, done = psutil.Process(child.pid), 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.1):
            peak = max(peak, _tree_rss(proc))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = child.communicate()
    done.set()
    sampler.join()
    if child.returncode:
        raise SystemExit(f"worker failed ({child.returncode}): {' '.join(argv)}\n{out}")
    result = json.loads(out.strip().splitlines()[-1])
    return Measured(result["seconds"], time.monotonic() - started, peak / 2**20, result["counts"])


def _verify_worker(directory: str) -> None:
    from pulsarlab.verify import spark_session, verify

    spark_session()  # JVM start is not part of the verify figure (reported as wall time)
    verdict = verify(directory)
    print(json.dumps({"seconds": verdict.seconds, "counts": verdict.counts()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated message counts")
    parser.add_argument("--workdir", type=Path, help="where histories go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated histories")
    parser.add_argument("--reuse", action="store_true", help="verify histories kept in --workdir, generating only missing ones")
    parser.add_argument("--worker-verify", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_verify:
        _verify_worker(args.worker_verify)
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pulsarlab-bench-"))
    table = Table(title="verify at scale (5 history rows per message)")
    for col in (
        "messages",
        "rows",
        "generate s",
        "spark verify s",
        "(wall incl. JVM)",
        "spark peak RSS MiB",
        "reference s",
        "reference peak RSS MiB",
        "reference/spark",
        "counts agree",
    ):
        table.add_column(col, justify="right")
    console = Console(width=200)
    for n in (int(s) for s in args.sizes.split(",")):
        directory = workdir / f"run-{n}"
        t = time.monotonic()
        if not (args.reuse and (directory / "read-c1.parquet").exists()):
            shutil.rmtree(directory, ignore_errors=True)
            generate(directory, n)
        generated = time.monotonic() - t
        spark = measure([sys.executable, str(Path(__file__).resolve()), "--worker-verify", str(directory)])
        ref = measure([sys.executable, str(HERE / "reference_checker.py"), str(directory)])
        agree = all(spark.counts.get(k) == v for k, v in ref.counts.items()) and all(
            spark.counts[k] == v for k, v in PLANTED.items()
        )
        nonzero = {k: v for k, v in spark.counts.items() if v}
        console.print(f"n={n:,}: spark {nonzero}, reference {ref.counts}")
        table.add_row(
            f"{n:,}",
            f"{5 * n - 2 * len(NEVER_DELIVERED) - len(LOST):,}",
            f"{generated:.1f}",
            f"{spark.seconds:.1f}",
            f"{spark.wall:.1f}",
            f"{spark.peak_rss_mib:,.0f}",
            f"{ref.seconds:.1f}",
            f"{ref.peak_rss_mib:,.0f}",
            f"{ref.seconds / spark.seconds:.2f}",
            "yes" if agree else "NO",
        )
        if not args.keep:
            shutil.rmtree(directory)
    console.print(table)


if __name__ == "__main__":
    main()
