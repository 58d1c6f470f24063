"""RTO from a run's history, per producer: its sends and its faults.

Read the way the verifier reads a history: the Parquet parts of :func:`pulsarlab.history.part_files`,
only the columns needed, ``op == "send"`` rows, ``ts`` in ns on the client's clock (an ``ok`` row's
``ts`` is when the acknowledgement came back); the faults that ran (``faults.parquet``, see
:mod:`pulsarlab.history.faults`), each from the moment its damage took effect where the nodes run (``effect_ts``; when a fault
reports none, the moment its action returned, ``ended_ts``).

- ``recovery_s`` per fault: from the moment the fault's damage is done (its action returned: killing
  four nodes takes a moment, during which the old owner may still acknowledge) to the first
  acknowledgement of a send *invoked after it* (an ack of a send already in flight says nothing
  about the cluster after the fault);
- ``longest_without_ack_s``: the longest interval with no acknowledgement, between the producer's
  first invoke and its last send event (the acks in between split it);
- ``stalls``: for a fault that moves nodes one at a time (a rolling upgrade), per node, the longest
  such interval of any producer that overlaps the node's window away (stop to ready): the publish
  stall that node's restart caused, and ``after_ready_s``: how long that interval went on after the
  node was ready again (how quickly clients came back to it: the part of the stall that does not
  depend on how long the machine took to restart the node).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.history import SCHEMA, part_files
from pulsarlab.history.faults import NodeWindow, read_faults

COLUMNS = ("op", "type", "producer", "seq", "ts")


@dataclass
class FaultRecovery:
    fault: str
    at_s: float
    recovery_s: float | None  # None: no send invoked after the fault was ever acknowledged
    sent_after: bool = True  # False: the producer sent nothing after the fault, so there is no recovery to measure


@dataclass
class ProducerRto:
    producer: str
    acked: int
    faults: list[FaultRecovery] = field(default_factory=list)
    longest_without_ack_s: float = 0.0
    longest_from_ns: int | None = None
    longest_to_ns: int | None = None


@dataclass
class NodeStall:
    fault: str
    node: str
    away_s: float  # from the node taken out to ready again
    longest_without_ack_s: float | None  # None: no producer was sending while it was away
    after_ready_s: float | None = None  # of those intervals, the longest part after the node was ready again


@dataclass
class Rto:
    producers: list[ProducerRto]
    stalls: list[NodeStall] = field(default_factory=list)

    @property
    def max_recovery_s(self) -> float | None:
        """The longest recovery of any producer after any fault it sent after; None if one never
        recovered (or there is nothing to measure: see :attr:`measured`)."""
        values = [f.recovery_s for p in self.producers for f in p.faults if f.sent_after]
        return None if not values or any(v is None for v in values) else max(values)  # type: ignore[type-var]

    @property
    def measured(self) -> bool:
        """Whether some producer sent after some fault (a fault that ends after the workload, such
        as a node start, has no recovery to measure)."""
        return any(f.sent_after for p in self.producers for f in p.faults)

    @property
    def max_outage_s(self) -> float | None:
        return max((p.longest_without_ack_s for p in self.producers), default=None)

    @property
    def max_stall_s(self) -> float | None:
        """The longest stall any node's window caused; None when no node window was measured."""
        return max((s.longest_without_ack_s for s in self.stalls if s.longest_without_ack_s is not None), default=None)

    @property
    def max_after_ready_s(self) -> float | None:
        """The longest a stall went on after its node was ready again; None when none was measured."""
        return max((s.after_ready_s for s in self.stalls if s.after_ready_s is not None), default=None)

    def to_json(self) -> dict:
        return {"max_recovery_s": _r(self.max_recovery_s), "max_outage_s": _r(self.max_outage_s),
                "producers": [{**asdict(p), "longest_without_ack_s": _r(p.longest_without_ack_s),
                               "faults": [{**asdict(f), "recovery_s": _r(f.recovery_s)} for f in p.faults]}
                              for p in self.producers],
                "stalls": [{**asdict(s), "away_s": _r(s.away_s), "longest_without_ack_s": _r(s.longest_without_ack_s),
                            "after_ready_s": _r(s.after_ready_s)}
                           for s in self.stalls]}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def read_columns(directory: str | Path, columns: tuple[str, ...]) -> pa.Table:
    """These columns of every event of a history, from its Parquet parts (older parts: nulls)."""
    schema = pa.schema([SCHEMA.field(c) for c in columns])
    tables = [pq.read_table(p, columns=list(columns), schema=SCHEMA).select(list(columns)) for p in part_files(directory)]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def read_sends(directory: str | Path) -> pa.Table:
    """The send events of a history (op, type, producer, seq, ts), from its Parquet parts."""
    table = read_columns(directory, COLUMNS)
    return table.filter(pc.equal(table["op"], "send"))


def compute(sends: pa.Table, faults: list[tuple[str, float, int]],
            windows: list[tuple[str, NodeWindow]] | None = None) -> Rto:
    """Per producer: recovery after each fault ``(description, at_s, done_ns)`` (``done_ns``: the wall
    clock when the fault's damage was done) and the longest window without an ack; per node window
    ``(fault, window)``, the stall it caused."""
    out = []
    spans: list[np.ndarray] = []  # per producer: first invoke, each ack between, last send event
    producers = sorted(p for p in pc.unique(sends["producer"]).to_pylist() if p is not None)
    for name in producers:
        mine = sends.filter(pc.equal(sends["producer"], name))
        kind = mine["type"]
        ts = mine["ts"].to_numpy()
        seq = mine["seq"].fill_null(-1).to_numpy()
        invoked = pc.equal(kind, "invoke").fill_null(False).to_numpy(zero_copy_only=False)
        ok = pc.equal(kind, "ok").fill_null(False).to_numpy(zero_copy_only=False)
        invoke_at = dict(zip(seq[invoked].tolist(), ts[invoked].tolist(), strict=True))
        ok_ts, ok_seq = ts[ok], seq[ok]
        order = np.argsort(ok_ts, kind="stable")
        ok_ts, ok_seq = ok_ts[order], ok_seq[order]
        p = ProducerRto(name, int(ok.sum()))
        for desc, at_s, done_ns in faults:
            # acks of sends invoked after the fault (a send with no invoke row counts by its ack time)
            after = np.array([invoke_at.get(s, t) >= done_ns for s, t in zip(ok_seq.tolist(), ok_ts.tolist(), strict=True)],
                             dtype=bool)
            later = ok_ts[after & (ok_ts >= done_ns)]
            sent_after = bool((ts[invoked] >= done_ns).any())
            p.faults.append(FaultRecovery(desc, round(at_s, 3), float(later.min() - done_ns) / 1e9 if len(later) else None,
                                          sent_after))
        if invoked.any():
            start, end = int(ts[invoked].min()), int(ts.max())
            points = np.concatenate(([start], ok_ts[(ok_ts > start) & (ok_ts < end)], [end]))
            spans.append(points)
            gaps = np.diff(points)
            i = int(np.argmax(gaps)) if len(gaps) else 0
            if len(gaps):
                p.longest_without_ack_s = float(gaps[i]) / 1e9
                p.longest_from_ns, p.longest_to_ns = int(points[i]), int(points[i + 1])
        out.append(p)
    return Rto(out, [_stall(desc, w, spans) for desc, w in windows or []])


def _stall(fault: str, w: NodeWindow, spans: list[np.ndarray]) -> NodeStall:
    """The longest interval without an ack, of any producer, that overlaps the node's window away,
    and the longest part of such an interval after the node was ready again (0 when every one ended
    while it was still away)."""
    longest: float | None = None
    after: float | None = None
    for points in spans:
        if len(points) < 2 or points[-1] < w.from_ts or points[0] > w.to_ts:
            continue  # this producer was not sending while the node was away
        overlapping = (points[1:] >= w.from_ts) & (points[:-1] <= w.to_ts)
        if overlapping.any():
            gap = float(np.diff(points)[overlapping].max()) / 1e9
            longest = gap if longest is None else max(longest, gap)
            past = float(max(int(points[1:][overlapping].max()) - w.to_ts, 0)) / 1e9
            after = past if after is None else max(after, past)
    return NodeStall(fault, w.node, (w.to_ts - w.from_ts) / 1e9, longest, after)


def rto_of_run(directory: str | Path) -> Rto:
    """RTO of a run directory, after each fault its history says was done."""
    rows = [r for r in read_faults(directory) or [] if r.ok]
    return compute(read_sends(directory), [(r.fault, r.offset_s, r.from_ts) for r in rows],
                   [(r.fault, w) for r in rows for w in r.parts])
