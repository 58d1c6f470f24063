"""Synthetic run histories in the format of ``docs/history.md``, with anomalies planted at known counts.

One run (``RUN``) on two clusters, ``a`` and ``b``: producers 0-3 send to cluster a, 4-7 to cluster b,
the same two-partition topic name on both; each cluster's subscription ``sub`` (two consumers,
``subscribe`` rows first) receives and acknowledges what was sent there (ack ``type`` "ok" on a,
null on b: null counts as ok), and each cluster is read back on its own with a ``scan`` row per
partition. Columns are built with numpy and pyarrow (no Python loop over messages), so histories
of tens of millions of messages take seconds.

:data:`KINDS` names what can be planted; :func:`generate` plants any set of them and returns what
each single kind should make a checker report (:class:`Planted`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.history import conform
from pulsarlab.history.schema import PART_SUFFIX, SCHEMA, WRITE_OPTIONS

RUN = "r20260101-000000-beef"
FOREIGN = "r20251231-235959-dead-p0"  # a producer of another run: its messages are left out
TOPIC = "persistent://lab/bench/orders"
CLUSTERS = ("a", "b")
PARTITIONS = 2
PRODUCERS = 8  # 0-3 on cluster a, 4-7 on cluster b
KEYS = 64  # same producer and key: seq s and s + KEYS, k and k + 8 * KEYS
T0 = 1_700_000_000_000_000_000
STEP = 10_000  # ns between two invokes: 100,000 msg/s
CHUNK = 1 << 22  # messages of one part made (and written) at a time
SPACING = 577  # messages between two planted anomalies (> 8 * KEYS + 16, so swaps never overlap)
OK, FAIL, INFO, NONE = 0, 1, 2, 3  # send completions; NONE: the invoke has no completion
KINDS = (
    "lost",
    "never_delivered",
    "idle_subscription",
    "corrupted",
    "duplicated_in_storage",
    "duplicated_delivery",
    "unexpected",
    "failed_but_stored",
    "recovered",
    "order_violations_producer",
    "order_violations_key",
    "foreign",
    "missing_scan",
    "incomplete_scan",
    "scan_error",
    "failed_consumer",
    "failed_producer",
    "unfinished",
)
EVIDENCE = {"missing_scan", "incomplete_scan", "scan_error", "failed_consumer", "failed_producer", "unfinished"}


@dataclass
class Planted:
    """What a checker must report for a history with exactly one kind planted."""

    status: str
    reasons: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    foreign: int = 0


@dataclass
class Messages:
    """One entry per message (the run's, then planted ones that were never sent)."""

    prod: np.ndarray
    seq: np.ndarray
    keyi: np.ndarray
    order: np.ndarray  # position in its partition's storage
    vt: np.ndarray  # virtual send index: timestamps follow from it
    sent: np.ndarray
    completion: np.ndarray
    stored: np.ndarray
    delivered: np.ndarray
    recv_corrupt: np.ndarray
    read_corrupt: np.ndarray
    recv_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ack_ts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def cl(self) -> np.ndarray:
        return np.where(self.prod >= PRODUCERS, 0, self.prod >= PRODUCERS // 2).astype(np.int64)

    @property
    def part(self) -> np.ndarray:
        return self.keyi & 1

    @property
    def consumer(self) -> np.ndarray:
        return (self.keyi >> 1) & 1


def base(n: int) -> Messages:
    k = np.arange(n, dtype=np.int64)
    seq = k >> 3
    m = Messages(
        prod=k & 7,
        seq=seq,
        keyi=seq % KEYS,
        order=k.astype(np.float64),
        vt=k,
        sent=np.ones(n, bool),
        completion=np.zeros(n, np.int8),
        stored=np.ones(n, bool),
        delivered=np.ones(n, bool),
        recv_corrupt=np.zeros(n, bool),
        read_corrupt=np.zeros(n, bool),
    )
    jitter = (k * 2_654_435_761) & 0xFFFFF  # 0..1 ms: deliveries of one key never overtake each other
    m.recv_ts = T0 + k * STEP + 3_000_000 + jitter
    m.ack_ts = m.recv_ts + 200_000
    return m


def extend(m: Messages, prod: list[int], seq: list[int], keyi: list[int], stored: bool, delivered: bool) -> None:
    """Append messages that were never sent (unexpected or foreign), stored last in their partition."""
    x = len(prod)
    n = len(m.prod)
    vt = np.arange(n, n + x, dtype=np.int64)
    m.prod, m.seq, m.keyi = np.append(m.prod, prod), np.append(m.seq, seq), np.append(m.keyi, keyi)
    m.order = np.append(m.order, (n + 10 * x + vt).astype(np.float64))
    m.vt = np.append(m.vt, vt)
    m.sent, m.completion = np.append(m.sent, np.zeros(x, bool)), np.append(m.completion, np.full(x, NONE, np.int8))
    m.stored, m.delivered = np.append(m.stored, np.full(x, stored)), np.append(m.delivered, np.full(x, delivered))
    m.recv_corrupt, m.read_corrupt = np.append(m.recv_corrupt, np.zeros(x, bool)), np.append(m.read_corrupt, np.zeros(x, bool))
    m.recv_ts = np.append(m.recv_ts, T0 + vt * STEP + 3_000_000)
    m.ack_ts = np.append(m.ack_ts, T0 + vt * STEP + 3_200_000)


def hex8(v: np.ndarray) -> pa.Array:
    nibbles = (v.astype(np.uint64)[:, None] >> np.arange(28, -1, -4, dtype=np.uint64)) & np.uint64(0xF)
    chars = np.frombuffer(b"0123456789abcdef", np.uint8)[nibbles.astype(np.int64)]
    return pa.array(np.ascontiguousarray(chars).view("S8").ravel(), pa.binary()).cast(pa.string())


def names(values: list[str], idx: np.ndarray) -> pa.Array:
    return pc.take(pa.array(values, pa.string()), pa.array(idx))


def const(n: int, value: str | None) -> pa.Array:
    return pa.nulls(n, pa.string()) if value is None else pc.fill_null(pa.nulls(n, pa.string()), value)


def message_ids(ledger: np.ndarray, entry: np.ndarray, part: np.ndarray) -> pa.Array:
    cols = [pc.cast(pa.array(x), pa.string()) for x in (ledger, entry, part)]
    return pc.binary_join_element_wise(
        const(len(ledger), "("), pc.binary_join_element_wise(*cols, const(len(ledger), "-1)"), ","), ""
    )


class History:
    """Rows of one history, built per part from :class:`Messages` plus a few hand-made extra rows."""

    def __init__(self, m: Messages):
        self.m = m
        self.producers = [f"{RUN}-p{i}" for i in range(PRODUCERS)] + [FOREIGN]
        self.keys = [f"k{i}" for i in range(KEYS)]
        self.extra: dict[str, list[dict[str, Any]]] = {}
        # (cluster, partition) -> None: no scan row; a dict (or a function of the row giving one): fields to change
        self.scan_edits: dict[tuple[int, int], Any] = {}
        self.drivers = ({f"p{i}": "produce" for i in range(PRODUCERS)}
                        | {f"{c}-c{j}": "consume" for c in CLUSTERS for j in (0, 1)}
                        | {f"read-{c}": "read" for c in CLUSTERS})
        self.failed: dict[str, str] = {}
        self.finished = True

    def common(self, idx: np.ndarray) -> dict[str, pa.Array]:
        m = self.m
        topics = [f"{TOPIC}-partition-{p}" for p in range(PARTITIONS)]
        return {
            "producer": names(self.producers, m.prod[idx]),
            "seq": pa.array(m.seq[idx]),
            "key": names(self.keys, m.keyi[idx]),
            "topic": names(topics, m.part[idx]),
            "cluster": names(list(CLUSTERS), m.cl[idx]),
            "run": const(len(idx), RUN),
        }

    def hashes(self, idx: np.ndarray, corrupt: np.ndarray | None = None) -> pa.Array:
        h = (self.m.vt[idx] * 2_654_435_761) & 0xFFFFFFFF
        return hex8(h if corrupt is None else np.where(corrupt, h ^ 1, h))

    def sends(self, prod: int) -> Iterator[pa.Table]:
        m = self.m
        for idx in _chunks(np.nonzero(m.sent & (m.prod == prod))[0]):
            c = self.common(idx)
            c["topic"] = const(len(idx), TOPIC)  # producers send to the partitioned topic itself
            invoke = pa.table(
                {
                    "op": const(len(idx), "send"),
                    "type": const(len(idx), "invoke"),
                    **c,
                    "payload_hash": self.hashes(idx),
                    "ts": pa.array(T0 + m.vt[idx] * STEP),
                }
            )
            done = idx[m.completion[idx] != NONE]
            kind = m.completion[done]
            c = self.common(done)
            c["topic"] = const(len(done), TOPIC)
            ok = kind == OK
            mid = pc.if_else(pa.array(ok), message_ids(np.full(len(done), 9), m.vt[done], m.part[done]),
                             const(len(done), None))
            completion = pa.table(
                {
                    "op": const(len(done), "send"),
                    "type": names(["ok", "fail", "info"], kind.astype(np.int64)),
                    **c,
                    "message_id": mid,
                    "error": pc.if_else(pa.array(ok), const(len(done), None), const(len(done), "Timeout")),
                    "ts": pa.array(T0 + m.vt[done] * STEP + 2_000_000 + (m.vt[done] & 0xFFFFF)),
                }
            )
            yield conform(invoke)
            yield conform(completion)

    def deliveries(self, cluster: int, consumer: int) -> Iterator[pa.Table]:
        m = self.m
        idx = np.nonzero(m.delivered & (m.cl == cluster) & (m.consumer == consumer))[0]
        idx = idx[np.argsort(m.recv_ts[idx], kind="stable")]
        sub = {
            "op": "subscribe",
            "topic": TOPIC,
            "cluster": CLUSTERS[cluster],
            "consumer": f"{CLUSTERS[cluster]}-c{consumer}",
            "subscription": "sub",
            "ts": T0 - 1_000_000_000,
            "run": RUN,
        }
        yield conform(pa.Table.from_pylist([sub]))
        recvs, acks = [], []
        for chunk in _chunks(idx):
            c = {
                **self.common(chunk),
                "consumer": const(len(chunk), f"{CLUSTERS[cluster]}-c{consumer}"),
                "subscription": const(len(chunk), "sub"),
            }
            mid = message_ids(100 + 10 * m.cl[chunk] + m.part[chunk], m.order[chunk].astype(np.int64), m.part[chunk])
            recvs.append(conform(pa.table(
                {
                    "op": const(len(chunk), "receive"),
                    **c,
                    "message_id": mid,
                    "payload_hash": self.hashes(chunk, m.recv_corrupt[chunk]),
                    "redelivery_count": pa.array(np.zeros(len(chunk), np.int32)),
                    "ts": pa.array(m.recv_ts[chunk]),
                    "publish_ts": pa.array(T0 + m.vt[chunk] * STEP),
                }
            )))
            acks.append(conform(pa.table(
                {
                    "op": const(len(chunk), "ack"),
                    "type": const(len(chunk), "ok" if cluster == 0 else None),
                    **c,
                    "message_id": mid,
                    "ts": pa.array(m.ack_ts[chunk]),
                }
            )))
            if len(chunk) == CHUNK:  # a big history: written as it is made (receives and acks interleave)
                yield from recvs + acks
                recvs, acks = [], []
        yield from recvs + acks

    def storage(self, cluster: int, dups: np.ndarray, rereads: np.ndarray) -> Iterator[pa.Table]:
        """The read rows of one cluster (duplicates at new ids, rereads at the same id) and a scan row per partition."""
        m = self.m
        base_idx = np.nonzero(m.stored & (m.cl == cluster))[0]
        dups, rereads = dups[m.cl[dups] == cluster], rereads[m.cl[rereads] == cluster]
        idx = np.concatenate([base_idx, dups, rereads])
        order = np.concatenate([m.order[base_idx], m.order[dups] + 0.5, m.order[rereads] + 0.25])
        again = np.concatenate([np.zeros(len(base_idx) + len(dups), bool), np.ones(len(rereads), bool)])
        part = m.part[idx]
        s = np.lexsort((order, part))
        idx, part, again = idx[s], part[s], again[s]
        starts = np.searchsorted(part, np.arange(PARTITIONS))
        rank = np.arange(len(idx)) - starts[part]
        entry = rank.copy()
        entry[again] = entry[np.nonzero(again)[0] - 1]  # read the same message again, at the same id
        ledger = np.full(len(idx), 100 + 10 * cluster) + part
        for chunk in _chunks(np.arange(len(idx))):
            rows = idx[chunk]
            yield conform(pa.table(
                {
                    "op": const(len(rows), "read"),
                    **self.common(rows),
                    "message_id": message_ids(ledger[chunk], entry[chunk], part[chunk]),
                    "payload_hash": self.hashes(rows, m.read_corrupt[rows]),
                    "read_index": pa.array(rank[chunk]),
                    "ts": pa.array(T0 + 10**12 + rank[chunk]),
                }
            ))
        scans = []
        for p in range(PARTITIONS):
            rows = np.nonzero(part == p)[0]
            at = rows[-1:]
            last = message_ids(ledger[at], entry[at], part[at])[0].as_py() if len(rows) else None
            row = {
                "op": "scan",
                "topic": f"{TOPIC}-partition-{p}",
                "cluster": CLUSTERS[cluster],
                "read_index": len(rows),
                "message_id": last,
                "end_message_id": last or f"({100 + 10 * cluster + p},-1,{p},-1)",
                "ts": T0 + 2 * 10**12,
                "run": RUN,
            }
            if (cluster, p) in self.scan_edits:
                edit = self.scan_edits[(cluster, p)]
                if edit is None:
                    continue
                row.update(edit(row) if callable(edit) else edit)
            scans.append(row)
        yield pa.Table.from_pylist(scans, schema=SCHEMA)

    def write(self, directory: Path, dups: np.ndarray, rereads: np.ndarray) -> None:
        for p in range(PRODUCERS):
            _write(directory, f"producer-p{p}", self.sends(p))
        for c in range(len(CLUSTERS)):
            for j in (0, 1):
                extra = [conform(pa.Table.from_pylist(self.extra.get(f"{CLUSTERS[c]}-c{j}", []), schema=SCHEMA))]
                _write(directory, f"consumer-{CLUSTERS[c]}-c{j}", itertools.chain(self.deliveries(c, j), extra))
            _write(directory, f"read-{CLUSTERS[c]}", self.storage(c, dups, rereads))
        drivers = [
            {
                "name": name,
                "mode": mode,
                "part": {"produce": f"producer-{name}", "consume": f"consumer-{name}"}.get(mode, name),
                "exit_code": 1 if name in self.failed else 0,
                "failed": name in self.failed,
                "reason": self.failed.get(name),
            }
            for name, mode in self.drivers.items()
        ]
        manifest = {
            "format": 1,
            "run": RUN,
            "topic": TOPIC,
            "partitions": PARTITIONS,
            "cluster": "a",
            "read_clusters": list(CLUSTERS),
            "subscription": "sub",
            "started_ts": T0,
            "ended_ts": T0 + 3 * 10**12,
            "finished": self.finished,
            "drivers": drivers,
        }
        (directory / "_run.json").write_text(json.dumps(manifest, indent=1))


def _chunks(idx: np.ndarray) -> Iterator[np.ndarray]:
    """``idx`` in slices of :data:`CHUNK` (one slice, maybe empty, when it is shorter)."""
    for start in range(0, max(len(idx), 1), CHUNK):
        yield idx[start:start + CHUNK]


def _write(directory: Path, name: str, tables: Iterable[pa.Table]) -> None:
    """One part, written a slice at a time (a history of 100 million messages does not fit in memory at once)."""
    with pq.ParquetWriter(directory / f"{name}{PART_SUFFIX}", SCHEMA, **WRITE_OPTIONS) as writer:
        for table in tables:
            if table.num_rows:
                writer.write_table(table)


def generate(directory: Path, n: int, kinds: set[str] | frozenset[str] = frozenset()) -> dict[str, Planted]:
    """Write a history of ``n`` sent messages with ``kinds`` planted; return what each kind alone should yield."""
    from bench.history_plant import plant  # the planting rules live next door

    if n < SPACING * 48:
        raise ValueError(f"need at least {SPACING * 48} messages to plant anomalies apart")
    m = base(n)
    h = History(m)
    dups, rereads, planted = plant(h, kinds)
    directory.mkdir(parents=True, exist_ok=True)
    h.write(directory, dups, rereads)
    return planted
