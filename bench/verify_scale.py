"""The Spark verifier next to the reference checker: do they agree on every rule, and how fast is each at scale?

Histories come from :mod:`bench.history_gen`: one run on two clusters in the format of
``docs/history.md`` (subscribe, send, receive, ack, read and scan rows; ``_run.json``), with
anomalies planted at known counts.

``--check`` (small, about a minute): one history per planted kind (each check, a subscription
known only from its ``subscribe`` row, other runs' messages, a missing, a short and a failed scan,
a failed consumer, a failed producer, an unfinished run), one clean and one with everything. Both
checkers judge each; any difference in status, number of reasons or a check's count is printed
and makes the exit code 1, as does the reference disagreeing with what was planted.

Timing (default): per size, both checkers judge the same history (every presence anomaly planted)
``--repeats`` times, each checker in a process of its own whose peak RSS (whole process tree, the
Spark JVM included) is sampled. For Spark, the session (JVM) start is timed on its own first (as
`pulsarlab verify` starts it), then each ``verify()``. Then ``pulsarlab verify DIR`` itself, as a
user runs it, ``--repeats`` times: each a new process that pays for Python, its imports and the
Spark JVM, its start overlapping the driver's reading as in every verify. Prints min and median
of each. Usage::

    python bench/verify_scale.py --check
    python bench/verify_scale.py --sizes 1000000,10000000 --repeats 3 [--reference-max 1000000] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: import this checkout's packages, not installed ones
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from rich.console import Console
from rich.table import Table

from bench.history_gen import EVIDENCE, KINDS, generate
from bench.reference_checker import check as reference_check

HERE = Path(__file__).resolve()
CHECK_SIZE = 30_000
PRESENCE_KINDS = frozenset(KINDS) - EVIDENCE


# ----- workers (each in a process of its own) -----------------------------------------------

def worker(kind: str, directories: list[str], repeats: int) -> None:
    """Judge each directory ``repeats`` times (each timed); for Spark, start and time the session first."""
    t = time.monotonic()
    if kind == "spark":
        from pulsarlab.verify import spark_session, verify

        spark_session()  # as `pulsarlab verify` starts it

        def judge(d: str) -> dict[str, Any]:
            return spark_summary(verify(d).to_json())
    else:
        judge = reference_check
    session = time.monotonic() - t
    results = []
    for d in directories:
        seconds = []
        for _ in range(repeats):
            t = time.monotonic()
            verdict = judge(d)
            seconds.append(time.monotonic() - t)
        results.append({"directory": d, "seconds": seconds, **verdict})
    print(json.dumps({"session_seconds": session, "results": results}))


def spark_summary(j: dict[str, Any]) -> dict[str, Any]:
    """Status, reasons, counts and message counts from a ``verdict.json`` (older verifiers have no status)."""
    return {"status": j.get("status", "pass" if j.get("ok") else "fail"), "reasons": j.get("reasons", []),
            "counts": {c["name"]: c["count"] for c in j["checks"]}, "messages": j.get("metrics", {}).get("messages", {})}


@dataclass
class Measured:
    wall: float
    peak_rss_mib: float
    output: dict[str, Any]


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    try:
        tree = [proc, *proc.children(recursive=True)]
    except psutil.Error:  # a child ended while the tree was listed: try again next tick
        return 0
    for p in tree:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def _sampled(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str, str, int]:
    """Run ``argv``, sampling its process tree's RSS every 100 ms: (seconds, peak MiB, stdout, stderr, exit code)."""
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    proc, peak, done = psutil.Process(child.pid), 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.1):
            peak = max(peak, _tree_rss(proc))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = child.communicate()
    done.set()
    sampler.join()
    return time.monotonic() - started, peak / 2**20, out, err, child.returncode


def run_worker(kind: str, directories: list[Path], repeats: int) -> Measured:
    """Run a worker process over ``directories``, sampling its process tree's RSS every 100 ms."""
    argv = [sys.executable, str(HERE), f"--worker-{kind}", *map(str, directories), "--repeats", str(repeats)]
    seconds, peak, out, err, rc = _sampled(argv)
    if rc:
        raise SystemExit(f"{kind} worker failed ({rc}): {' '.join(argv)}\n{err[-3000:]}")
    return Measured(seconds, peak, json.loads(out.strip().splitlines()[-1]))


def run_cli(directory: Path, repeats: int) -> tuple[list[float], float]:
    """``pulsarlab verify DIR`` of this checkout as a user runs it, ``repeats`` times, each a new
    process paying for its own Python, imports and Spark JVM: the wall time of each, the peak RSS."""
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    walls, peak = [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeats):
            argv = [sys.executable, "-m", "pulsarlab.cli", "verify", str(directory), "--json", "--out", f"{tmp}/verdict.json"]
            seconds, rss, _, err, rc = _sampled(argv, env)
            if rc not in (0, 1):  # 1: the verdict is fail, as planted
                raise SystemExit(f"pulsarlab verify failed ({rc}): {' '.join(argv)}\n{err[-3000:]}")
            walls.append(seconds)
            peak = max(peak, rss)
    return walls, peak


# ----- --check --------------------------------------------------------------------------------

def differences(ref: dict[str, Any], spark: dict[str, Any]) -> list[str]:
    out = []
    if ref["status"] != spark["status"]:
        out.append(f"status: reference {ref['status']}, spark {spark['status']}")
    if len(ref["reasons"]) != len(spark["reasons"]):
        out.append(f"reasons: reference {len(ref['reasons'])} {ref['reasons']}, spark {len(spark['reasons'])} {spark['reasons']}")
    for name in sorted(set(ref["counts"]) | set(spark["counts"])):
        a, b = ref["counts"].get(name, "(no such check)"), spark["counts"].get(name, "(no such check)")
        if a != b:
            out.append(f"{name}: reference {a}, spark {b}")
    return out


def versus_planted(ref: dict[str, Any], planted: Any) -> list[str]:
    nonzero = {k: v for k, v in ref["counts"].items() if v}
    got = (ref["status"], len(ref["reasons"]), nonzero, ref["foreign"])
    want = (planted.status, planted.reasons, planted.counts, planted.foreign)
    return [] if got == want else [f"reference {got} but planted {want}"]


def check_mode(workdir: Path, size: int) -> int:
    histories: dict[str, Path] = {}
    expected = {}
    for name in (*KINDS, "clean", "all"):
        kinds = {name} if name in KINDS else (set(KINDS) if name == "all" else set())
        histories[name] = workdir / name
        shutil.rmtree(histories[name], ignore_errors=True)
        expected[name] = generate(histories[name], size, kinds).get(name)
    ref = run_worker("reference", list(histories.values()), 1).output["results"]
    spark_run = run_worker("spark", list(histories.values()), 1)
    spark = spark_run.output["results"]
    table = Table(title=f"--check: {size:,} messages per history")
    for col in ("history", "reference", "spark", "agree"):
        table.add_column(col)
    failures = 0
    for (name, _), r, s in zip(histories.items(), ref, spark, strict=True):
        diff = differences(r, s)
        if expected[name] is not None:
            diff += versus_planted(r, expected[name])
        elif name == "clean" and (r["status"], r["reasons"]) != ("pass", []):
            diff.append(f"reference says {r['status']} on the clean history")
        failures += bool(diff)

        def brief(x: dict[str, Any]) -> str:
            nz = ", ".join(f"{k}={v}" for k, v in x["counts"].items() if v)
            return f"{x['status']} reasons={len(x['reasons'])} {nz}"

        table.add_row(name, brief(r), brief(s), "yes" if not diff else "[red]NO[/]: " + "; ".join(diff))
    console = Console(width=240)
    console.print(table)
    msg_diff = [(n, r["messages"], s["messages"]) for (n, _), r, s in zip(histories.items(), ref, spark, strict=True)
                if s["messages"] and any(s["messages"].get(k) != v for k, v in r["messages"].items())]
    for n, a, b in msg_diff:
        console.print(f"messages differ on {n}: reference {a}, spark {b}")
    console.print(f"spark session start {spark_run.output['session_seconds']:.1f} s; "
                  f"{failures} of {len(histories)} histories disagree")
    return 1 if failures else 0


# ----- timing ---------------------------------------------------------------------------------

def timing_mode(workdir: Path, sizes: list[int], repeats: int, keep: bool, reference_max: int) -> None:
    table = Table(title=f"verify at scale: min / median of {repeats} runs (two clusters, ~5 rows per message)")
    for col in ("messages", "generate s", "spark JVM start s", "spark verify s", "spark wall incl. JVM s", "spark peak RSS MiB",
                "pulsarlab verify s (CLI)", "CLI peak RSS MiB", "reference s", "reference peak RSS MiB",
                "reference / spark verify (medians)", "agree"):
        table.add_column(col, justify="right")
    console = Console(width=240)
    for n in sizes:
        directory = workdir / f"run-{n}"
        t = time.monotonic()
        if not (directory / "_run.json").exists():
            generate(directory, n, PRESENCE_KINDS)
        generated = time.monotonic() - t
        spark = run_worker("spark", [directory], repeats)
        cli, cli_peak = run_cli(directory, repeats)
        s = spark.output["results"][0]
        if n > reference_max:  # its memory grows with the history (about 4.7 GiB per million messages here)
            ref, r, diff = Measured(0.0, 0.0, {}), {"seconds": [], "status": "-", "counts": {}}, []
        else:
            ref = run_worker("reference", [directory], repeats)
            r = ref.output["results"][0]
            diff = differences(r, s)
        console.print(f"n={n:,}: spark {s['status']} {s['counts']}; reference {r['status']} {r['counts']}")
        for line in diff:
            console.print(f"  differs: {line}")
        jvm = spark.output["session_seconds"]

        def mm(xs: list[float]) -> str:
            return f"{min(xs):.1f} / {statistics.median(xs):.1f}" if xs else "-"

        table.add_row(f"{n:,}", f"{generated:.1f}", f"{jvm:.1f}", mm(s["seconds"]), f"{jvm + s['seconds'][0]:.1f}",
                      f"{spark.peak_rss_mib:,.0f}", mm(cli), f"{cli_peak:,.0f}",
                      mm(r["seconds"]), f"{ref.peak_rss_mib:,.0f}" if r["seconds"] else "-",
                      f"{statistics.median(r['seconds']) / statistics.median(s['seconds']):.1f}x" if r["seconds"] else "-",
                      "-" if not r["seconds"] else "yes" if not diff else "NO")
        if not keep:
            shutil.rmtree(directory)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare both checkers on one small history per planted kind")
    parser.add_argument("--size", type=int, default=CHECK_SIZE, help="messages per history in --check")
    parser.add_argument("--sizes", default="1000000,10000000", help="timing: comma-separated message counts")
    parser.add_argument("--repeats", type=int, default=3, help="timing: runs of each checker per size")
    parser.add_argument("--reference-max", type=int, default=1_000_000, help="timing: skip the reference checker above this size")
    parser.add_argument("--workdir", type=Path, help="where histories go (default: a temp dir); timing reuses them")
    parser.add_argument("--keep", action="store_true", help="keep the generated histories")
    parser.add_argument("--worker-spark", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--worker-reference", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_spark or args.worker_reference:
        worker("spark" if args.worker_spark else "reference", args.worker_spark or args.worker_reference, args.repeats)
        return
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pulsarlab-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.check:
            sys.exit(check_mode(workdir, args.size))
        timing_mode(workdir, [int(x) for x in args.sizes.split(",")], args.repeats, args.keep, args.reference_max)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
