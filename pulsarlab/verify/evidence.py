"""Is the evidence whole? The storage scans and the run manifests, read on the driver.

A verdict may only say ``pass`` when everything it needs was observed: every (cluster, topic) on
which a producer sent, and every cluster its topic replicates to, was read back to its end,
partition by partition (``scan`` rows), and every driver of the run did its job (``_run.json``).
What is missing becomes a *reason*; see ``docs/history.md`` ("Evidence, and the three verdicts").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.history.manifest import MANIFEST
from pulsarlab.history.schema import PART_SUFFIX, SCHEMA
from pulsarlab.verify.dims import Dims, base_topic

SCAN_COLUMNS = ("op", "cluster", "topic", "read_index", "message_id", "end_message_id", "error")
REQUIRED_COLUMNS = ("op", "ts")  # older histories may lack later columns (null then), never these
# a driver's own final counts (``_run.json``) -> the (op, type) rows of its part they account for.
# The driver journals each event before it counts it. Invokes, receipts and reads happen in its
# own loops, before its journal closes: their rows must equal the counts. A send's outcome comes
# from a client callback, which may still fire after the journal closed (client.close() fails
# what is in flight): such an outcome is counted but not recorded (the history holds the send as
# of unknown outcome, never as acknowledged), so its rows may fall short of the count, not exceed it.
COUNTED_ROWS: dict[str, dict[str, tuple[str, str | None, bool]]] = {
    "produce": {"invoked": ("send", "invoke", True), "acked": ("send", "ok", False),
                "failed": ("send", "fail", False), "unknown": ("send", "info", False)},
    "consume": {"received": ("receive", None, True)},
    "read": {"stored": ("read", None, True)},
}
_ID = re.compile(r"^\(?\s*(-?\d+)\s*[,:]\s*(-?\d+)\s*(?:[,:]\s*(-?\d+)\s*(?:[,:]\s*(-?\d+)\s*)?)?\)?$")


def message_position(text: str | None) -> tuple[int, int] | None:
    """(ledger, entry) of a message id written as ``(l,e,p,b)`` or ``l:e:p:b``; None if unreadable."""
    m = _ID.match(text.strip()) if text else None
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True)
class Scan:
    """One reader's scan of one topic partition on one cluster (a ``scan`` row)."""

    cluster: str
    topic: str
    read: int
    last: str | None
    end: str | None
    error: str | None
    file: str = ""
    rows: int | None = None  # the ``read`` rows of this cluster and partition in the same file

    @property
    def problem(self) -> str | None:
        """Why this scan does not prove it saw the whole partition; None when it does."""
        if self.error:
            return self.error
        end = message_position(self.end)
        if end is None:
            return f"end position unknown ({self.end!r})"
        if end[1] < 0:  # an empty partition: nothing to reach
            return None
        last = message_position(self.last)
        if last is None or last < end:
            return f"read {self.read} messages up to {self.last or 'none'}, but the end is {self.end}"
        return None


@dataclass
class Evidence:
    """What is missing (reasons), whether a producer's own record may be short, and whether the
    evidence contradicts itself (a part cut short, unreadable or of an unknown schema): a check of
    presence found on such evidence may be an artifact of it, so it decides nothing either."""

    reasons: list[str] = field(default_factory=list)
    producer_failed: bool = False
    contradicted: bool = False
    runs: list[str] = field(default_factory=list)


def read_scans(paths: list[str]) -> list[Scan]:
    """Every ``scan`` row of the given part files (the files that hold reads are few and scan rows
    fewer), each with the number of ``read`` rows its file holds for the same cluster and partition."""
    out = []
    for path in paths:
        names = set(pq.read_schema(path).names)
        table = pq.read_table(path, columns=[c for c in SCAN_COLUMNS if c in names])
        reads = table.filter(pc.equal(table.column("op"), "read")).select(["cluster", "topic"])
        counted = reads.group_by(["cluster", "topic"]).aggregate([("cluster", "count", pc.CountOptions("all"))])
        rows = {(r["cluster"] or "", r["topic"] or ""): r["cluster_count"] for r in counted.to_pylist()}
        table = table.filter(pc.equal(table.column("op"), "scan"))
        for r in table.to_pylist():
            cluster, topic = r.get("cluster") or "", r.get("topic") or ""
            out.append(Scan(cluster, topic, r.get("read_index") or 0, r.get("message_id"), r.get("end_message_id"),
                            r.get("error"), file=str(path), rows=rows.get((cluster, topic), 0)))
    return out


def contradictions(scans: list[Scan]) -> list[str]:
    """A file whose ``scan`` rows say more (or fewer) messages were read than the ``read`` rows it
    holds contradicts itself (cut short by a full disk, a killed copy): one line per partition."""
    said: dict[tuple[str, str, str], int] = {}
    held: dict[tuple[str, str, str], int] = {}
    for s in scans:
        if s.rows is None:
            continue
        key = (s.file, s.cluster, s.topic)
        said[key] = said.get(key, 0) + s.read
        held[key] = s.rows
    out = []
    for (file, cluster, topic), n in sorted(said.items()):
        if n != held[(file, cluster, topic)]:
            out.append(f"{file}: its scan of {topic} on cluster {cluster or '?'} says {n} message(s) were read, "
                       f"but the file holds {held[(file, cluster, topic)]} read row(s) for it")
    return out


def schema_problems(schema: pa.Schema) -> list[str]:
    """How a part's columns differ from the history's one schema: a column the verifier does not
    know, one of another type, a required one missing. Later columns an older part lacks are fine."""
    known = {f.name: f.type for f in SCHEMA}
    problems = [f"no column {name!r}" for name in REQUIRED_COLUMNS if name not in schema.names]
    for f in schema:
        if f.name not in known:
            problems.append(f"unknown column {f.name!r}")
        elif f.type != known[f.name]:
            problems.append(f"column {f.name!r} is {f.type}, not {known[f.name]}")
    return problems


def readable_parts(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The part files whose Parquet footer can be read and whose schema is the history's, and a
    reason for each other one (a file cut short, not Parquet at all, or of a schema the verifier
    does not know): judged without it, or on columns misread, a verdict could only guess."""
    good, reasons = [], []
    for path in paths:
        try:
            schema = pq.read_schema(path)
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            reasons.append(f"history part {path} cannot be read ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}):"
                           " truncated or not Parquet; the verdict leaves it out")
            continue
        if problems := schema_problems(schema):
            reasons.append(f"history part {path} has a schema the verifier does not know ({'; '.join(problems)});"
                           " the verdict leaves it out")
        else:
            good.append(path)
    return good, reasons


def driver_contradictions(manifests: list[dict[str, Any]], readable: set[Path]) -> list[str]:
    """A driver's own final counts (``counts`` in ``_run.json``: what it sent, saw acknowledged,
    received, read back) against the rows its part holds (see :data:`COUNTED_ROWS`): a part cut
    short (a full disk, a copy killed half-way) or missing says less than its driver did, one that
    holds more was written by something else. One line per difference."""
    out = []
    for m in manifests:
        if "_unreadable" in m:
            continue
        directory, run = Path(m["_path"]).parent, str(m.get("run") or m["_path"])
        for d in m.get("drivers", []):
            counts, rules = d.get("counts"), COUNTED_ROWS.get(str(d.get("mode")), {})
            if not counts or d.get("failed") or not rules:
                continue
            who = f"run {run}: driver {d.get('name')} ({d.get('mode')})"
            path = directory / f"{d.get('part')}{PART_SUFFIX}"
            if not path.exists():
                said = {k: counts.get(k, 0) for k in rules if counts.get(k, 0)}
                if said:
                    out.append(f"{who} counted {_listed(said)}, but left no history part {path.name}")
                continue
            if path not in readable:
                continue  # named already: unreadable or of an unknown schema
            table = pq.read_table(path, columns=["op", "type"])
            for name, (op, kind, exact) in rules.items():
                rows = pc.equal(table.column("op"), op)
                if kind is not None:
                    rows = pc.and_(rows, pc.equal(table.column("type"), kind))
                held, counted = pc.sum(rows.cast("int64")).as_py() or 0, counts.get(name, 0)
                if held > counted or (exact and held < counted):
                    what = f"{op}/{kind}" if kind else op
                    out.append(f"{who} counted {counted} {name}, but its part {path} holds {held} {what} row(s)")
    return out


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items())


def read_manifests(directories: list[Path]) -> list[dict[str, Any]]:
    """The ``_run.json`` of each directory that has one."""
    found = []
    for d in directories:
        path = d / MANIFEST
        if path.exists():
            try:
                found.append({**json.loads(path.read_text()), "_path": str(path)})
            except (OSError, ValueError) as exc:
                found.append({"_path": str(path), "_unreadable": str(exc)})
    return found


def _partitions(topic: str, manifests: list[dict[str, Any]], scans: list[Scan]) -> list[str]:
    """The partitions of ``topic`` that must each have a complete scan."""
    names = {s.topic for s in scans if base_topic(s.topic) == topic}
    for m in manifests:
        if base_topic(str(m.get("topic", ""))) == topic:
            n = int(m.get("partitions") or 0)
            names.update([f"{topic}-partition-{i}" for i in range(n)] if n else [topic])
    return sorted(names) or [topic]


def replication_targets(manifests: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Base topic -> every cluster a run manifest says it replicates to (geo-replication)."""
    out: dict[str, set[str]] = {}
    for m in manifests:
        for topic, clusters in (m.get("replication") or {}).items():
            out.setdefault(base_topic(str(topic)), set()).update(str(c) for c in clusters or [])
    return out


def judge(dims: Dims, scans: list[Scan], manifests: list[dict[str, Any]]) -> Evidence:
    """Every piece of missing evidence, each as one sentence."""
    ev = Evidence()
    for m in manifests:
        if "_unreadable" in m:
            ev.reasons.append(f"run manifest {m['_path']} cannot be read: {m['_unreadable']}")
            continue
        run = str(m.get("run") or m["_path"])
        ev.runs.append(run)
        if not m.get("finished", False):
            ev.reasons.append(f"run {run} never finished (its manifest says so): the workload itself died")
        for d in m.get("drivers", []):
            if d.get("failed"):
                why = d.get("reason") or "no reason given"
                ev.reasons.append(f"run {run}: driver {d.get('name')} ({d.get('mode')}) failed: {why}")
                ev.producer_failed = ev.producer_failed or d.get("mode") == "produce"
    scans_disagree = contradictions(scans)
    ev.reasons += scans_disagree
    ev.contradicted = bool(scans_disagree)
    sent = {scope for scopes in dims.scopes.values() for scope in scopes}
    sent_topics = {topic for _, topic in sent}
    replicas = {(c, t) for t, clusters in replication_targets(manifests).items() if t in sent_topics for c in clusters}
    for cluster, topic in sorted(sent | replicas):
        mine = [s for s in scans if s.cluster == cluster and base_topic(s.topic) == topic]
        if not mine:
            role = " (a replication target)" if (cluster, topic) in replicas - sent else ""
            ev.reasons.append(f"no read-back of {topic} on cluster {cluster or '?'}{role}: its storage was never scanned")
            continue
        for partition in _partitions(topic, manifests, mine):
            scans_here = [s for s in mine if s.topic == partition]
            if not scans_here:
                ev.reasons.append(f"no scan of {partition} on cluster {cluster}")
            elif all(s.problem for s in scans_here):
                ev.reasons.append(f"read-back of {partition} on cluster {cluster} incomplete: {scans_here[0].problem}")
    return ev
