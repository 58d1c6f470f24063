"""The numbers a report plots, computed over the whole history in pyarrow and numpy: events per
second by kind and cluster, and latency percentiles per time window. A plot gets a few thousand
points whatever the history's size.

Times are seconds since ``t0`` (the run's start). A latency is placed at the time its message was
sent, so the sends a fault held up show at the fault. Percentiles are exact, nearest rank
(``ceil(p * n)``-th smallest), like the verifier's whole-run figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NS: Final = 1_000_000_000
STEPS_S: Final[tuple[int, ...]] = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
MAX_RATE_BINS: Final = 7200
"""Rates are per second up to two hours of run; longer runs average over wider bins."""
MAX_LATENCY_WINDOWS: Final = 300
PERCENTILES: Final[tuple[tuple[str, float], ...]] = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))

KINDS: Final[dict[tuple[str, str | None], str]] = {
    ("send", "invoke"): "sent",
    ("send", "ok"): "acknowledged",
    ("send", "fail"): "failed",
    ("send", "info"): "unknown outcome",
    ("receive", None): "delivered",
    ("ack", "ok"): "consumer acks",
    ("ack", None): "consumer acks",  # a null ack type is ok (older histories)
    ("ack", "fail"): "consumer acks failed",
}
"""What each (op, type) is called on the page, in legend order."""
KIND_ORDER: Final[tuple[str, ...]] = tuple(dict.fromkeys(KINDS.values()))


def step_for(span_ns: int, max_bins: int) -> int:
    """The smallest step of :data:`STEPS_S` (in ns) that cuts ``span_ns`` into at most ``max_bins`` bins."""
    for s in STEPS_S:
        if span_ns // (s * NS) + 1 <= max_bins:
            return s * NS
    return math.ceil((span_ns + 1) / max_bins / NS) * NS


@dataclass
class Rates:
    """Events per second in consecutive bins; ``counts[(kind, cluster)]`` holds raw counts per bin."""

    t0_ns: int
    bin_ns: int
    counts: dict[tuple[str, str | None], np.ndarray] = field(default_factory=dict)

    @property
    def bins(self) -> int:
        return len(next(iter(self.counts.values()))) if self.counts else 0

    @property
    def starts_s(self) -> np.ndarray:
        """Each bin's left edge, in seconds since ``t0``."""
        return np.arange(self.bins) * (self.bin_ns / NS)

    def per_second(self, key: tuple[str, str | None]) -> np.ndarray:
        return self.counts[key] / (self.bin_ns / NS)

    def clusters(self) -> list[str | None]:
        return sorted({c for _, c in self.counts}, key=lambda c: (c is None, c or ""))


def time_span(events: pa.Table) -> tuple[int, int]:
    """(first, last) ``ts`` of the events."""
    mm = pc.min_max(events["ts"])
    return mm["min"].as_py(), mm["max"].as_py()


def rates(events: pa.Table, t0_ns: int, bin_ns: int | None = None) -> Rates:
    """Count the events of each kind (:data:`KINDS`) and cluster per bin, from ``t0_ns`` to the last event.

    Every bin of the span is present, zero where nothing happened: an outage shows as a drop to zero.
    """
    if events.num_rows == 0:
        return Rates(t0_ns, bin_ns or NS)
    first, last = time_span(events)
    if first < t0_ns:
        raise ValueError(f"an event at {first} precedes t0 {t0_ns}")
    bin_ns = bin_ns or step_for(last - t0_ns, MAX_RATE_BINS)
    n_bins = (last - t0_ns) // bin_ns + 1
    binned = pa.table({
        "op": events["op"],
        "type": events["type"],
        "cluster": events["cluster"],
        "bin": pc.divide(pc.subtract(events["ts"], t0_ns), bin_ns),  # integer division: both are int64
    })
    grouped = binned.group_by(["op", "type", "cluster", "bin"]).aggregate([([], "count_all")])
    rows: dict[tuple[str, str | None], list[int]] = {}
    keys = zip(grouped["op"].to_pylist(), grouped["type"].to_pylist(), grouped["cluster"].to_pylist(), strict=True)
    for i, (op, typ, cluster) in enumerate(keys):
        label = KINDS.get((op, typ))
        if label is not None:
            rows.setdefault((label, cluster), []).append(i)
    bins, ns = grouped["bin"].to_numpy(), grouped["count_all"].to_numpy()
    out = Rates(t0_ns, bin_ns)
    for key in sorted(rows, key=lambda k: (KIND_ORDER.index(k[0]), k[1] is None, k[1] or "")):
        arr = np.zeros(n_bins, np.int64)
        np.add.at(arr, bins[rows[key]], ns[rows[key]])
        out.counts[key] = arr
    return out


@dataclass
class Latencies:
    """Percentiles of one latency per window, in ms; windows without a sample are left out."""

    t0_ns: int
    window_ns: int
    starts_s: np.ndarray  # left edge of each window with samples, seconds since t0
    count: np.ndarray
    percentiles: dict[str, np.ndarray]  # p50, p95, p99, max (ms)
    samples: int = 0


def windows(times_ns: np.ndarray, values_ns: np.ndarray, t0_ns: int, window_ns: int) -> Latencies:
    """Nearest-rank percentiles and the maximum of ``values_ns`` per window of ``times_ns``."""
    if len(times_ns) == 0:
        empty = np.zeros(0)
        return Latencies(t0_ns, window_ns, empty, np.zeros(0, np.int64), {n: empty for n, _ in (*PERCENTILES, ("max", 1))})
    win = (times_ns - t0_ns) // window_ns
    order = np.lexsort((values_ns, win))
    win, vals = win[order], values_ns[order]
    ids, starts, counts = np.unique(win, return_index=True, return_counts=True)
    pct = {}
    for name, p in PERCENTILES:
        rank = np.maximum(np.ceil(p * counts).astype(np.int64), 1)
        pct[name] = vals[starts + rank - 1] / 1e6
    pct["max"] = vals[starts + counts - 1] / 1e6
    return Latencies(t0_ns, window_ns, ids * (window_ns / NS), counts, pct, int(len(vals)))


ABSENT: Final = np.iinfo(np.int64).min
"""A message's time that is not in the history."""


@dataclass
class Messages:
    """Per message (producer, seq): its first invoke, first broker ack, first delivery, and the latest
    publish time its deliveries carry (ns; :data:`ABSENT` where there is none)."""

    invoke: np.ndarray
    ok: np.ndarray
    received: np.ndarray
    published: np.ndarray


def _mask(condition: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return pc.fill_null(condition, False).to_numpy(zero_copy_only=False)


def messages(events: pa.Table) -> Messages:
    """One sort over the send and receive rows, by (producer, seq, which time, time): the first row of
    each (message, which time) is its earliest such time. A publish time enters negated, so its
    earliest is the latest publish time."""
    identified = _mask(pc.and_(events["producer"].is_valid(), events["seq"].is_valid()))
    op, typ = events["op"], events["type"]
    sides = [
        (_mask(pc.and_(pc.equal(op, "send"), pc.equal(typ, "invoke"))), events["ts"], 1),
        (_mask(pc.and_(pc.equal(op, "send"), pc.equal(typ, "ok"))), events["ts"], 1),
        (_mask(pc.equal(op, "receive")), events["ts"], 1),
        (_mask(pc.and_(pc.equal(op, "receive"), events["publish_ts"].is_valid())), events["publish_ts"], -1),
    ]
    sides = [(m & identified, v, sign) for m, v, sign in sides]
    producer = pc.fill_null(pc.dictionary_encode(events["producer"].combine_chunks()).indices, -1).to_numpy()
    seq = pc.fill_null(events["seq"], 0).to_numpy()
    code = np.concatenate([producer[m] for m, _, _ in sides])
    sq = np.concatenate([seq[m] for m, _, _ in sides])
    side = np.concatenate([np.full(int(m.sum()), i, np.int8) for i, (m, _, _) in enumerate(sides)])
    value = np.concatenate([pc.fill_null(v, 0).to_numpy()[m] * sign for m, v, sign in sides])
    if not len(code):
        return Messages(*(np.zeros(0, np.int64) for _ in range(4)))
    span = int(sq.max()) - int(sq.min()) + 1
    if (int(code.max()) + 1) * span * len(sides) < 1 << 62:  # (producer, seq, side) packed in one int64: two sorts, not four
        packed = (code.astype(np.int64) * span + (sq - sq.min())) * len(sides) + side
        by_value = np.argsort(value, kind="stable")
        order = by_value[np.argsort(packed[by_value], kind="stable")]
    else:
        order = np.lexsort((value, side, sq, code))
    code, sq, side, value = code[order], sq[order], side[order], value[order]
    new_message = np.r_[True, (code[1:] != code[:-1]) | (sq[1:] != sq[:-1])]
    first = new_message | np.r_[True, side[1:] != side[:-1]]
    message = np.cumsum(new_message) - 1
    out = np.full((len(sides), int(new_message.sum())), ABSENT, np.int64)
    out[side[first], message[first]] = value[first]
    published = np.where(out[3] == ABSENT, ABSENT, -out[3])
    return Messages(out[0], out[1], out[2], published)


def publish_latency(m: Messages) -> tuple[np.ndarray, np.ndarray]:
    """(invoke, broker ack - invoke) of every acknowledged send, in ns."""
    timed = (m.invoke != ABSENT) & (m.ok != ABSENT)
    return m.invoke[timed], m.ok[timed] - m.invoke[timed]


def end_to_end_latency(m: Messages) -> tuple[np.ndarray, np.ndarray]:
    """(publish time, first delivery - publish time) of every delivered message, in ns; the publish
    time is the one carried in the message, else the send's invoke."""
    sent = np.where(m.published != ABSENT, m.published, m.invoke)
    timed = (m.received != ABSENT) & (sent != ABSENT)
    return sent[timed], m.received[timed] - sent[timed]


@dataclass
class Aggregates:
    """Everything plotted, for one run."""

    t0_ns: int
    end_ns: int
    rates: Rates
    publish: Latencies
    end_to_end: Latencies


def aggregate(events: pa.Table, t0_ns: int | None = None) -> Aggregates:
    """Rates and latency windows of a run's send/receive/ack events; ``t0_ns`` defaults to the first event."""
    first, last = time_span(events)
    t0 = first if t0_ns is None else min(t0_ns, first)
    window = step_for(last - t0, MAX_LATENCY_WINDOWS)
    per_message = messages(events)
    pub_t, pub_v = publish_latency(per_message)
    e2e_t, e2e_v = end_to_end_latency(per_message)
    return Aggregates(
        t0, last, rates(events, t0), windows(pub_t, pub_v, t0, window), windows(e2e_t, e2e_v, t0, window)
    )
