"""Small hand-made run directories for the report's tests: real history parts written by
:class:`HistoryWriter`, a manifest, and optionally a verdict, faults and a scenario verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pulsarlab.history import HistoryWriter
from pulsarlab.history.faults import FaultJournal, FaultRow
from pulsarlab.history.manifest import DriverOutcome, Manifest
from pulsarlab.verify.model import CHECKS, Check, Verdict

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
RATE = 40  # messages per second per producer
SECONDS = 20
OUTAGE = (8.0, 12.0)  # no ack and no delivery in between: the broker is down
PUB_MS = 5  # publish latency of every send outside the outage
E2E_MS = 12  # end-to-end latency of every message outside the outage


def write_run(
    directory: Path, *, verdict: str | None = "pass", faults: bool = True, scenario: bool = False, run: str = "r1"
) -> Path:
    """Two producers (one per cluster) at :data:`RATE` msg/s for :data:`SECONDS` s starting one second after
    ``T0``; during :data:`OUTAGE` sends are invoked but complete only when it ends (their latency grows)."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, cluster in enumerate(("eu", "us")):
        producer = f"{run}-p{i}"
        with HistoryWriter(directory, f"producer-p{i}") as pw, HistoryWriter(directory, f"consumer-c{i}") as cw:
            cw.append(op="subscribe", cluster=cluster, topic="t", consumer=f"c{i}", subscription="s", ts=T0)
            for seq in range(RATE * SECONDS):
                sent = T0 + NS + seq * NS // RATE
                in_outage = OUTAGE[0] * NS <= sent - T0 < OUTAGE[1] * NS
                done = T0 + int(OUTAGE[1] * NS) + seq if in_outage else sent + PUB_MS * 1_000_000
                common = {"producer": producer, "seq": seq, "key": f"k{seq % 7}", "topic": "t", "cluster": cluster}
                pw.append(op="send", type="invoke", ts=sent, **common)
                pw.append(op="send", type="ok", ts=done, message_id=f"(1,{seq},-1,-1)", **common)
                got = max(done, sent + E2E_MS * 1_000_000)
                cw.append(op="receive", ts=got, publish_ts=sent, consumer=f"c{i}", subscription="s", **common)
                cw.append(op="ack", type="ok", ts=got + 1_000_000, consumer=f"c{i}", subscription="s", **common)
    Manifest(run, "t", 0, "eu", ["eu", "us"], "s", started_ts=T0, ended_ts=T0 + (SECONDS + 2) * NS, finished=True,
             drivers=[DriverOutcome(f"p{i}", "produce", f"producer-p{i}", 0) for i in (0, 1)]).write(directory)
    if verdict is not None:
        write_verdict(directory, verdict)
    if faults:  # as the scheduler writes them: its clock starts with the first send, one second after T0
        journal = FaultJournal(directory)
        for step, (at, action, phase, done) in enumerate([(OUTAGE[0], "kill", "applied", "killed pulsar1-eu"),
                                                          (OUTAGE[1], "start", "healed", "started pulsar1-eu")]):
            began = T0 + int(at * NS)
            journal.append(FaultRow(step, action, ("pulsar1-eu",), ("pulsar1-eu",), phase, at - 1, began,
                                    began + NS // 10, "ok", done))
    if scenario:
        (directory / "scenario.json").write_text(json.dumps(SCENARIO))
    return directory


def write_verdict(directory: Path, status: str, judged: Path | None = None) -> Path:
    """A verdict in the verifier's own format: ``pass`` (every check zero), ``fail`` (3 lost) or
    ``inconclusive`` (every check zero, a scan missing)."""
    checks = [Check(name, 3 if (status == "fail" and name == "lost") else 0) for name in CHECKS]
    if status == "fail":
        checks[0].examples = [{"producer": "r1-p0", "seq": 41}]
    metrics: dict[str, Any] = {
        "messages": {"sent": 2 * RATE * SECONDS, "acknowledged": 2 * RATE * SECONDS},
        "publish_latency_ms": {"p50": 5.0, "p99": 3000.0},
        "longest_gap_without_ack_s": {"seconds": 4.0, "from_ts": T0 + 8 * NS, "to_ts": T0 + 12 * NS},
    }
    reasons = ["no scan of partition 0 on eu: storage was not read"] if status == "inconclusive" else []
    verdict = Verdict([str(judged or directory)], checks, metrics, seconds=1.5, reasons=reasons)
    assert verdict.status == status
    return verdict.write(directory / "verdict.json")


SCENARIO: dict[str, Any] = {
    "scenario": "kill-topic-owner",
    "status": "pass",
    "expectations": [
        {"expectation": "lost == 0", "actual": 0, "passed": True},
        {"expectation": "rto_s < 2", "actual": 4.0, "passed": False},
        {"expectation": "longest window without ack <= 10s", "actual": 4.0, "status": "fail"},
    ],
    "rto": {"r1-p0": {"first_ok_after_fault_s": 4.0, "longest_gap_s": 4.0}},
    "rpo": 0,
}
