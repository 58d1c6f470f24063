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
  first invoke and its last send event (the acks in between split it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.history import SCHEMA, part_files
from pulsarlab.history.faults import read_faults

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
class Rto:
    producers: list[ProducerRto]

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

    def to_json(self) -> dict:
        return {"max_recovery_s": _r(self.max_recovery_s), "max_outage_s": _r(self.max_outage_s),
                "producers": [{**asdict(p), "longest_without_ack_s": _r(p.longest_without_ack_s),
                               "faults": [{**asdict(f), "recovery_s": _r(f.recovery_s)} for f in p.faults]}
                              for p in self.producers]}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def read_sends(directory: str | Path) -> pa.Table:
    """The send events of a history (op, type, producer, seq, ts), from its Parquet parts."""
    schema = pa.schema([SCHEMA.field(c) for c in COLUMNS])
    tables = [pq.read_table(p, columns=list(COLUMNS), schema=SCHEMA).select(list(COLUMNS)) for p in part_files(directory)]
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    return table.filter(pc.equal(table["op"], "send"))


def compute(sends: pa.Table, faults: list[tuple[str, float, int]]) -> Rto:
    """Per producer: recovery after each fault ``(description, at_s, done_ns)`` (``done_ns``: the wall
    clock when the fault's damage was done) and the longest window without an ack."""
    out = []
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
            gaps = np.diff(points)
            i = int(np.argmax(gaps)) if len(gaps) else 0
            if len(gaps):
                p.longest_without_ack_s = float(gaps[i]) / 1e9
                p.longest_from_ns, p.longest_to_ns = int(points[i]), int(points[i + 1])
        out.append(p)
    return Rto(out)


def rto_of_run(directory: str | Path) -> Rto:
    """RTO of a run directory, after each fault its history says was done."""
    faults = [(r.fault, r.offset_s, r.from_ts) for r in read_faults(directory) or [] if r.ok]
    return compute(read_sends(directory), faults)
