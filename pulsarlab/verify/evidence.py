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

from pulsarlab.history.manifest import MANIFEST, manifest_problems
from pulsarlab.history.schema import PART_SUFFIX, part_files
from pulsarlab.verify.dims import Dims, base_topic, dict_column
from pulsarlab.verify.parts import UnreadablePart, each_file
from pulsarlab.verify.reading import first_line

SCAN_COLUMNS = ("op", "cluster", "topic", "read_index", "message_id", "end_message_id", "error")
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
    last_read: str | None = None  # the message id of the last of them

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
    fewer), each with the number of ``read`` rows its file holds for the same cluster and partition
    and the message id of the last of them (by ``read_index``)."""
    def scans_of(path: str) -> list[Scan]:
        try:
            return _scans_of(path)
        except (OSError, ValueError) as exc:
            raise UnreadablePart(path, first_line(exc)) from exc

    return [scan for found in each_file(scans_of, paths) for scan in found]


def _scans_of(path: str) -> list[Scan]:
    """The scans of one file, read a row group at a time (a read-back part of 100 million messages
    holds 50 million rows): its narrow columns in each, the strings (message ids) only in the row
    groups that hold a scan row or a partition's last read row."""
    pf = pq.ParquetFile(path, page_checksum_verification=True, read_dictionary=["op", "cluster", "topic"])
    names = set(pf.schema_arrow.names)
    columns = [c for c in SCAN_COLUMNS[:4] if c in names]
    rows: dict[tuple[str, str], int] = {}  # read rows per (cluster, partition)
    tops: dict[tuple[str, str], tuple[int | None, list[int]]] = {}  # highest read_index, rows holding it
    scans: list[tuple[int, tuple[str, str], int | None]] = []  # (row, partition, read_index)
    start = 0
    for rg in range(pf.metadata.num_row_groups):
        group = pf.read_row_group(rg, columns=columns)
        clusters, ccode = _coded(group, "cluster")
        topics, tcode = _coded(group, "topic")
        code = pc.add(pc.multiply(ccode, len(topics)), tcode)
        names_of = [(c or "", t or "") for c in clusters for t in topics]  # by code
        op = group.column("op")
        is_read = pc.equal(op, "read").fill_null(False)
        counted = pc.value_counts(code.filter(is_read))
        for k, n in zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist(), strict=True):
            rows[names_of[k]] = rows.get(names_of[k], 0) + n
        if "read_index" in names:
            index = group.column("read_index").combine_chunks()
            for row, k, i in _last_reads(code.filter(is_read), index.filter(is_read), pc.indices_nonzero(is_read)):
                best, held = tops.get(names_of[k], (None, []))
                if not held or (i is not None and (best is None or i > best)):
                    tops[names_of[k]] = (i, [start + row])
                elif i == best:
                    held.append(start + row)
        at = pc.indices_nonzero(pc.equal(op, "scan").fill_null(False))
        indices = group.column("read_index").take(at).to_pylist() if "read_index" in names else [None] * len(at)
        scans += [(start + row, names_of[k], i) for row, k, i in
                  zip(at.to_pylist(), code.take(at).to_pylist(), indices, strict=True)]
        start += group.num_rows
    wanted = {row for row, _, _ in scans}
    if "message_id" in names:
        wanted |= {row for _, held in tops.values() for row in held}
    strings = _rows_at(pf, sorted(wanted), [c for c in SCAN_COLUMNS[4:] if c in names])
    last = {key: strings[held[-1]].get("message_id") for key, (_, held) in tops.items()} if "message_id" in names else {}
    out = []
    for row, key, index in scans:
        r = strings[row]
        out.append(Scan(key[0], key[1], index or 0, r.get("message_id"), r.get("end_message_id"), r.get("error"),
                        file=str(path), rows=rows.get(key, 0), last_read=last.get(key)))
    return out


def _last_reads(code: pa.Array, index: pa.Array, rows: pa.Array) -> list[tuple[int, int, int | None]]:
    """(row, partition code, read_index) of the read rows at their partition's highest
    ``read_index`` (all rows of a partition whose every index is null), in file order."""
    if not len(code):
        return []
    top = pa.table({"k": code, "i": index}).group_by("k", use_threads=False).aggregate([("i", "max")])
    highest: list[int | None] = [None] * (pc.max(code).as_py() + 1)
    for k, i in zip(top.column("k").to_pylist(), top.column("i_max").to_pylist(), strict=True):
        highest[k] = i
    mine = pc.take(pa.array(highest, pa.int64()), code)
    at_top = pc.if_else(mine.is_null(), index.is_null(), pc.equal(index, mine).fill_null(False))
    return list(zip(rows.filter(at_top).to_pylist(), code.filter(at_top).to_pylist(), index.filter(at_top).to_pylist(),
                    strict=True))


def _rows_at(pf: pq.ParquetFile, rows: list[int], columns: list[str]) -> dict[int, dict[str, Any]]:
    """``columns`` of the given rows (sorted), reading only the row groups that hold them."""
    out: dict[int, dict[str, Any]] = {row: {} for row in rows}
    if not columns or not rows:
        return out
    start, i = 0, 0
    for rg in range(pf.metadata.num_row_groups):
        end = start + pf.metadata.row_group(rg).num_rows
        local = []
        while i < len(rows) and rows[i] < end:
            local.append(rows[i] - start)
            i += 1
        if local:
            picked = pf.read_row_group(rg, columns=columns).take(pa.array(local, pa.int64()))
            for j, values in zip(local, picked.to_pylist(), strict=True):
                out[start + j] = values
        start = end
    return out


def _coded(table: pa.Table, name: str) -> tuple[list[str | None], pa.Array]:
    """A column's distinct values and each row's index among them (:func:`dict_column`), as int64
    even when there is one value."""
    values, codes = dict_column(table, name)
    return values, codes if codes is not None else pa.repeat(pa.scalar(0, pa.int64()), table.num_rows)


def contradictions(scans: list[Scan]) -> list[str]:
    """A file whose ``scan`` rows say more (or fewer) messages were read than the ``read`` rows it
    holds, or that the last one read was another than its last read row, contradicts itself (cut
    short by a full disk, a killed copy, rows of another file): one line per partition."""
    said: dict[tuple[str, str, str], list[Scan]] = {}
    held: dict[tuple[str, str, str], int] = {}
    for s in scans:
        if s.rows is None:
            continue
        key = (s.file, s.cluster, s.topic)
        said.setdefault(key, []).append(s)
        held[key] = s.rows
    out = []
    for (file, cluster, topic), mine in sorted(said.items()):
        n, rows = sum(s.read for s in mine), held[(file, cluster, topic)]
        where = f"{file}: its scan of {topic} on cluster {cluster or '?'} says"
        if n != rows:
            out.append(f"{where} {n} message(s) were read, but the file holds {rows} read row(s) for it")
        elif len(mine) == 1 and rows and message_position(mine[0].last) != message_position(mine[0].last_read):
            out.append(f"{where} the last message read was {mine[0].last}, but its last read row (by read_index) "
                       f"is {mine[0].last_read}")
    return out


def driver_contradictions(manifests: list[dict[str, Any]], readable: set[Path]) -> list[str]:
    """A driver's own final counts (``counts`` in ``_run.json``: what it sent, saw acknowledged,
    received, read back) against the rows its part holds (see :data:`COUNTED_ROWS`): a part cut
    short (a full disk, a copy killed half-way) or missing says less than its driver did, one that
    holds more was written by something else. And the parts of a run's folder against the drivers
    its manifest lists: a part no driver wrote is another run's. One line per difference."""
    out = []
    for m in manifests:
        if "_unreadable" in m:
            continue
        directory, run = Path(m["_path"]).parent, str(m.get("run") or m["_path"])
        drivers = m.get("drivers", [])
        listed = {str(d.get("part")) for d in drivers}
        for path in part_files(directory) if drivers else []:
            if path.stem not in listed:
                out.append(f"history part {path} was written by no driver of run {run} (its {MANIFEST} lists "
                           f"{', '.join(sorted(listed))})")
        for d in drivers:
            counts, rules = d.get("counts"), COUNTED_ROWS.get(str(d.get("mode")), {})
            if d.get("failed") or not rules:
                continue
            who = f"run {run}: driver {d.get('name')} ({d.get('mode')})"
            path = directory / f"{d.get('part')}{PART_SUFFIX}"
            if not path.exists():
                said = {k: counts.get(k, 0) for k in rules if counts.get(k, 0)} if counts else {}
                if said:
                    out.append(f"{who} counted {_listed(said)}, but left no history part {path.name}")
                elif counts is None and d.get("exit_code") == 0:
                    out.append(f"{who} exited 0, but left no history part {path.name}")
                continue
            if not counts or path not in readable:
                continue  # not known, or named already: unreadable or of an unknown schema
            held_rows = _rows_per_rule(path, rules)
            for name, (op, kind, exact) in rules.items():
                held, counted = held_rows[name], counts.get(name, 0)
                if held > counted or (exact and held < counted):
                    what = f"{op}/{kind}" if kind else op
                    out.append(f"{who} counted {counted} {name}, but its part {path} holds {held} {what} row(s)")
    return out


def _rows_per_rule(path: Path, rules: dict[str, tuple[str, str | None, bool]]) -> dict[str, int]:
    """How many rows of each rule's (op, type) a part holds, read a row group at a time (a part of a
    big run holds tens of millions of rows)."""
    held = dict.fromkeys(rules, 0)
    try:
        pf = pq.ParquetFile(path, page_checksum_verification=True, read_dictionary=["op", "type"])
        for rg in range(pf.metadata.num_row_groups):
            table = pf.read_row_group(rg, columns=["op", "type"])
            for name, (op, kind, _) in rules.items():
                rows = pc.equal(table.column("op"), op)
                if kind is not None:
                    rows = pc.and_(rows, pc.equal(table.column("type"), kind))
                held[name] += pc.sum(rows.cast("int64")).as_py() or 0
    except (OSError, ValueError) as exc:
        raise UnreadablePart(path, first_line(exc)) from exc
    return held


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in counts.items())


def read_manifests(directories: list[Path]) -> list[dict[str, Any]]:
    """The ``_run.json`` of each directory that has one; one that cannot be read or is not of the
    format written by ``workload run`` carries why (``_unreadable``)."""
    found = []
    for d in directories:
        path = d / MANIFEST
        if path.exists():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                found.append({"_path": str(path), "_unreadable": first_line(exc)})
                continue
            problems = manifest_problems(data)
            found.append({"_path": str(path), "_unreadable": "; ".join(problems)} if problems else {**data, "_path": str(path)})
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
            ev.contradicted = True  # which drivers ran, and how they ended, is not known
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
    ev.contradicted = ev.contradicted or bool(scans_disagree)
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
