"""The reduce side of the verifier: per-message aggregation, every check and metric, with pyarrow.

A reduce task gets the events of its messages (Arrow blobs from the map tasks, :mod:`.events`) and
:func:`aggregate` turns them into one row per message: events sorted by message once, then each
aggregate a scatter into the message's slot (a hash aggregation only where a message has two rows
of a kind). :func:`summarise` then answers, per chunk of messages, every per-message check with
counts and the first examples, and collects the message counts, minima and maxima and latency
histograms; what needs other messages goes through a second, small exchange: the stored and
delivered (order, seq) pairs of the order checks, per producer, and the ack times of the
longest-gap metric, per time bucket. There :func:`resolve` sorts each route and finds order
violations and gaps. The driver merges the few results (:func:`merge`). Like :mod:`.events`,
this module needs pyarrow only on executors.

Latency percentiles are exact (nearest rank, ``ceil(p * n)``): each value is kept at the
resolution the verdict prints (a microsecond, rounded half to even), in a histogram.
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pulsarlab.verify.events import (
    CID_SHIFT,
    CONSUMER_SHIFT,
    NO_CLUSTER,
    NO_SEQ,
    OP_CODE,
    POSITION_BITS,
    SEQ_BITS,
    SID_MASK,
    SID_SHIFT,
    read_blobs,
)

PERCENTILES = (0.5, 0.95, 0.99, 0.999)
MAX_EXAMPLES = 20
PARTIAL = -1  # the route of the partial results: they pass the second exchange untouched
CHUNK_ROWS = 1 << 20
_POSITION_MASK = (1 << POSITION_BITS) - 1
_COUNTED = ("sent", "acknowledged", "failed", "info", "indeterminate", "stored", "delivered")


@dataclass(frozen=True)
class Plan:
    """What every reduce task needs of the dimensions."""

    clusters: tuple[str, ...]
    subs: tuple[tuple[str, str], ...]
    consumers: tuple[str, ...]
    scanned: tuple[tuple[int, ...], ...]  # per cluster: producers whose storage view there is a read scan
    never: tuple[tuple[int, ...], ...]  # per subscription: the producers it must receive from
    one_key: bool
    routes: tuple[int, ...]  # the route value that Spark's hash partitioning sends to each partition of the second exchange
    gap_lo: int
    gap_width: int
    gap_buckets: int


Example = tuple[tuple[Any, ...], dict[str, Any]]  # (sort key, example)
Gap = tuple[int, int, int]  # (length, from, to)


def add_found(found: dict[str, list[Any]], name: str, count: int, examples: list[Example]) -> None:
    """Add to a check's ``[count, first examples]`` (plain lists: they are pickled on executors)."""
    entry = found.setdefault(name, [0, []])
    entry[0] += count
    entry[1] = sorted(entry[1] + examples, key=lambda e: e[0])[:MAX_EXAMPLES]


def example(pidx: int | None, seq: int | None, detail: dict[str, Any]) -> Example:
    """One example with the key the verdict orders by: producer, seq (nulls first), then the detail
    as Spark's ``to_json`` writes it (null fields left out)."""
    detail = {k: v for k, v in detail.items() if v is not None}
    text = json.dumps(detail, separators=(",", ":"), ensure_ascii=False)
    return (pidx is not None, pidx or 0, seq is not None, seq or 0, text), detail


# -- helpers ------------------------------------------------------------------------------------
def _bit(bits: pa.Array, index: pa.Array | int) -> pa.Array:
    """Whether bit ``index`` is set; false where either is null."""
    if isinstance(index, int):
        out = pc.not_equal(pc.bit_wise_and(bits, 1 << index), 0)
    else:
        shift = index.fill_null(0)
        out = pc.and_(pc.equal(pc.bit_wise_and(pc.shift_right(bits, shift), 1), 1), index.is_valid())
    return out.fill_null(False)


def _true(mask: pa.Array) -> pa.Array:
    return mask.fill_null(False) if mask.null_count else mask


def _first(table: pa.Table, mask: pa.Array, k: int = MAX_EXAMPLES) -> list[dict[str, Any]]:
    """The first ``k`` rows where ``mask`` holds, by (pidx, seq), nulls first."""
    rows = table.filter(mask)
    return rows.take(sort_indices(rows, [("pidx", "at_start"), ("seq", "at_start")])[:k]).to_pylist()


def sort_indices(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Array:
    """Ascending sort indices by ``(column, null placement)`` keys."""
    try:
        return pc.sort_indices(table, sort_keys=[(k, "ascending", nulls) for k, nulls in keys])
    except (TypeError, ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError):  # pyarrow < 22: one placement for all
        columns, sort_keys = {}, []
        for k, nulls in keys:
            col = table.column(k)
            flag = pc.cast(col.is_null() if nulls == "at_start" else col.is_valid(), pa.int8())
            columns[f"{k}_n"], columns[k] = pc.subtract(1, flag), col
            sort_keys += [(f"{k}_n", "ascending"), (k, "ascending")]
        return pc.sort_indices(pa.table(columns), sort_keys=sort_keys)


def _histogram(values: pa.Array) -> pa.Table:
    """Latencies in ns, counted per printed value: ``key * 500`` ns is a value that rounds (to the
    microsecond, half to even, as ``round(v / 1e6, 3)``) like every value with that key."""
    q = pc.cast(pc.floor(pc.divide(pc.cast(pc.add(values, 500), pa.float64()), 1000.0)), pa.int64())
    halfway = pc.equal(pc.add(values, 500), pc.multiply(q, 1000))
    keys = pc.subtract(pc.multiply(q, 2), pc.cast(halfway, pa.int64()))
    counts = pc.value_counts(keys)
    return pa.table({"key": counts.field("values"), "n": counts.field("counts")})


def _columns(t: pa.Table, plan: Plan) -> dict[str, pa.Array]:
    c = {name: t.column(name).combine_chunks() for name in t.column_names}
    if plan.one_key:
        low = pc.bit_wise_and(c["mkey"], NO_SEQ)
        c["pidx"] = pc.shift_right(c["mkey"], SEQ_BITS)
        c["seq"] = pc.if_else(pc.equal(low, NO_SEQ), pa.scalar(None, pa.int64()), low)
    return c


# -- per message --------------------------------------------------------------------------------
def reduce_events(plan: Plan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of the reduce task: the events of its messages (Arrow blobs from the map tasks),
    aggregated per message, then everything :func:`summarise` does."""
    payloads = [p for batch in batches for p in batch.column("payload").to_pylist()]
    events = read_blobs(payloads)
    del payloads
    messages = aggregate(events, plan) if events is not None and events.num_rows else None
    del events
    yield from summarise(plan, iter(messages.to_batches(max_chunksize=CHUNK_ROWS)) if messages is not None else iter(()))


def aggregate(events: pa.Table, plan: Plan) -> pa.Table:
    """One row per message (the columns the checks read), from its events.

    Events are sorted by message once; an aggregate over the rows of one kind is a scatter into the
    message's slot when no message has two such rows (the usual case), else a hash aggregation.
    """
    if plan.one_key:
        key = events.column("mkey").combine_chunks()
    else:  # (pidx, seq) as one long, seq by its rank among this task's seqs
        seqs = pc.dictionary_encode(events.column("seq").combine_chunks())
        codes = pc.cast(seqs.indices.fill_null(len(seqs.dictionary)), pa.int64())
        key = pc.add(pc.shift_left(events.column("pidx").combine_chunks(), 32), codes)
    order = pc.sort_indices(key)
    events, key = events.take(order), key.take(order)
    new = _starts(key)
    seg = pc.subtract(pc.cumulative_sum(pc.cast(new, pa.int64())), 1)
    firsts = pc.indices_nonzero(new)
    m = len(firsts)
    out: dict[str, pa.Array] = {}
    if plan.one_key:
        out["mkey"] = key.take(firsts)
    else:
        out["pidx"] = events.column("pidx").take(firsts).combine_chunks()
        out["seq"] = events.column("seq").take(firsts).combine_chunks()
    tag = events.column("tag").combine_chunks()
    opc = pc.bit_wise_and(tag, 15)
    columns = {"s": seg, "tag": tag, **{x: events.column(x).combine_chunks() for x in ("a", "b", "c")}}
    subsets = {}  # op code -> its events (still in message order)
    for code in pc.unique(opc).to_pylist():
        rows = pc.indices_nonzero(pc.equal(opc, code))
        subsets[code] = {name: col.take(rows) for name, col in columns.items()}
    none = {name: col.slice(0, 0) for name, col in columns.items()}

    def rows(op: str | int, where: Any = None) -> dict[str, pa.Array]:
        """The events of one op (a name or a code), those where ``where(tag)`` holds if given."""
        t = subsets.get(OP_CODE.get(op, op) if isinstance(op, str) else op, none)
        if where is None or not len(t["s"]):
            return t
        mask = where(t["tag"])
        return {name: col.filter(mask) for name, col in t.items()}

    def reduce(t: dict[str, pa.Array], values: str | pa.Array, how: str) -> pa.Array:
        s, v = t["s"], t[values] if isinstance(values, str) else values
        if v.null_count:
            s, v = s.filter(v.is_valid()), v.drop_null()
        return _scatter_reduce(s, v, how, m)

    def present(t: dict[str, pa.Array]) -> pa.Array:
        if not len(t["s"]):
            return pa.repeat(False, m)
        return pc.scatter(pa.repeat(True, len(t["s"])), t["s"], max_index=m - 1).is_valid()

    def highest(arrays: list[pa.Array]) -> pa.Array:
        return pc.max_element_wise(*arrays, skip_nulls=True) if len(arrays) > 1 else arrays[0]

    def bits(op: str, indices: range) -> pa.Array:
        """bit_or of ``1 << cid`` over the op's events: one presence test per cluster."""
        total = pa.repeat(pa.scalar(0, pa.int64()), m)
        for i in indices:
            here = present(rows(op, lambda t, i=i: pc.equal(_cid(t), i)))
            total = pc.add(total, pc.if_else(here, 1 << i, 0))
        return total

    sends = ("invoke", "ok", "info", "fail")
    kinds = pa.repeat(pa.scalar(0, pa.int64()), m)
    for op in sends:
        if OP_CODE[op] in subsets:
            kinds = pc.add(kinds, pc.if_else(present(rows(op)), 1 << OP_CODE[op], 0))
    out["kinds"] = pc.cast(kinds, pa.int32())
    out["invoke_ts"] = reduce(rows("invoke"), "a", "min")
    out["ok_ts"] = reduce(rows("ok"), "a", "min")
    out["last_send_ts"] = highest([reduce(rows(op), "a", "max") for op in sends])
    ok = rows("ok", lambda t: pc.not_equal(_cid(t), NO_CLUSTER))
    out["ok_cid"] = pc.cast(reduce(ok, _cid(ok["tag"]), "max"), pa.int32())
    out["publish_ts"] = highest([reduce(rows(code), "c", "max") for code in subsets] or [pa.nulls(m, pa.int64())])
    out["read_bits"] = bits("read", range(len(plan.clusters)))
    out["recv_bits"] = bits("receive", range(len(plan.clusters)))
    out["key_hash"] = highest([reduce(rows("invoke"), "b", "max"), reduce(rows("receive"), "b", "max")])
    for i in range(len(plan.clusters)):
        here = rows("read", lambda t, i=i: pc.equal(_cid(t), i))
        out[f"idmin_{i}"] = reduce(here, "a", "min")
        out[f"idmax_{i}"] = reduce(here, "a", "max")
        out[f"position_{i}"] = reduce(here, "b", "min")
    for j in range(len(plan.subs)):
        got = rows("receive", lambda t, j=j: pc.equal(_sid(t), j))
        out[f"recv_first_{j}"] = first = reduce(got, "a", "min")
        out[f"recv_last_{j}"] = reduce(got, "a", "max")
        out[f"ack_first_{j}"] = reduce(rows("ack", lambda t, j=j: pc.equal(_sid(t), j)), "a", "min")
        # the consumer of the first delivery (of the earliest such row when several share its time)
        at_first = pc.equal(got["a"], first.take(got["s"])).fill_null(False)
        s = got["s"].filter(at_first)
        keep = _starts(s)
        who = pc.subtract(pc.shift_right(got["tag"].filter(at_first).filter(keep), CONSUMER_SHIFT), 1)
        who = pc.if_else(pc.greater_equal(who, 0), who, pa.scalar(None, pa.int64()))
        out[f"consumer_{j}"] = pc.cast(_scatter_reduce(s.filter(keep), who, "min", m), pa.int32())
    return pa.table(out)


def _cid(tag: pa.Array) -> pa.Array:
    return pc.bit_wise_and(pc.shift_right(tag, CID_SHIFT), 63)


def _sid(tag: pa.Array) -> pa.Array:
    return pc.subtract(pc.bit_wise_and(pc.shift_right(tag, SID_SHIFT), SID_MASK), 1)


def _starts(s: pa.Array) -> pa.Array:
    """Where a run of equal values of a sorted array starts."""
    if len(s) == 0:
        return pa.array([], pa.bool_())
    return pa.concat_arrays([pa.array([True]), pc.not_equal(s.slice(1), s.slice(0, len(s) - 1))])


def _repeats(s: pa.Array) -> bool:
    """Whether a sorted array of message slots names a slot twice."""
    return len(s) > 1 and bool(pc.any(pc.equal(s.slice(1), s.slice(0, len(s) - 1))).as_py())


def _scatter_reduce(s: pa.Array, v: pa.Array, how: str, m: int) -> pa.Array:
    """``how`` of the values ``v`` per message slot ``s`` (sorted), as an array of ``m`` slots."""
    if len(s) == 0:
        return pa.nulls(m, v.type)
    if _repeats(s):
        g = pa.table({"s": s, "v": v}).group_by("s", use_threads=False).aggregate([("v", how)])
        s, v = g.column("s").combine_chunks(), g.column(f"v_{how}").combine_chunks()
    return pc.scatter(v, s, max_index=m - 1)


# -- per partition ------------------------------------------------------------------------------
def summarise(plan: Plan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of the first reduce task: partial results and routed rows for one partition."""
    partial: dict[str, Any] = {"found": {}, "hist": {"pub": [], "e2e": []}, "minmax": {}}
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        pending.append(batch)
        size += batch.num_rows
        if size >= CHUNK_ROWS:
            yield from _chunk(plan, pa.Table.from_batches(pending), partial)
            pending, size = [], 0
    if pending:
        yield from _chunk(plan, pa.Table.from_batches(pending), partial)
    for name in ("pub", "e2e"):
        hists = partial["hist"][name]
        if hists:
            merged = pa.concat_tables(hists).group_by("key").aggregate([("n", "sum")])
            partial["hist"][name] = (merged.column("key").to_pylist(), merged.column("n_sum").to_pylist())
        else:
            partial["hist"][name] = ([], [])
    yield _out(PARTIAL, partial)


def _out(route: int, payload: Any) -> pa.RecordBatch:
    return pa.record_batch({"route": pa.array([route], pa.int64()), "payload": pa.array([pickle.dumps(payload, protocol=5)])})


def _minmax(partial: dict[str, Any], name: str, values: pa.Array, use: str) -> None:
    value = (pc.min if use == "min" else pc.max)(values).as_py()
    if value is not None:
        old = partial["minmax"].get(name)
        partial["minmax"][name] = value if old is None else (min if use == "min" else max)(old, value)


def _chunk(plan: Plan, t: pa.Table, partial: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    c = _columns(t, plan)
    kinds = c["kinds"].fill_null(0)
    n_invoke, n_ok, n_info, n_fail = (_bit(kinds, OP_CODE[k]) for k in ("invoke", "ok", "info", "fail"))
    read_bits, recv_bits = c["read_bits"].fill_null(0), c["recv_bits"].fill_null(0)
    stored, delivered = pc.not_equal(read_bits, 0), pc.not_equal(recv_bits, 0)
    stored_any = pc.or_(stored, delivered)
    uncertain = pc.and_(n_info, pc.invert(n_ok))
    failed = pc.and_(pc.and_(n_fail, pc.invert(n_ok)), pc.invert(n_info))
    counts = {
        "sent": n_invoke,
        "acknowledged": n_ok,
        "failed": failed,
        "info": uncertain,
        "indeterminate": pc.and_(uncertain, pc.invert(stored_any)),
        "stored": stored,
        "delivered": delivered,
    }
    for name, mask in counts.items():
        partial[name] = partial.get(name, 0) + (pc.sum(mask).as_py() or 0)
    for name, use in (("ok_ts", "min"), ("ok_ts", "max"), ("invoke_ts", "min"), ("last_send_ts", "max")):
        _minmax(partial, f"{use}_{name}", c[name], use)

    # -- per-message checks, in the order the verdict lists their examples
    ok_cid = c["ok_cid"]
    scanned = pa.repeat(False, len(t))
    for i, pidx in enumerate(plan.scanned):
        if pidx:
            here = pc.and_(pc.equal(ok_cid, i), pc.is_in(c["pidx"], pa.array(pidx, pa.int64())))
            scanned = pc.or_(scanned, _true(here))
    stored_where = pc.if_else(scanned, _bit(read_bits, ok_cid), _bit(recv_bits, ok_cid))
    view = {"pidx": c["pidx"], "seq": c["seq"]}

    def check(name: str, mask: pa.Array, detail: Any, extra: dict[str, pa.Array] | None = None) -> None:
        mask = _true(mask)
        count = pc.sum(mask).as_py() or 0
        if not count:
            return
        rows = _first(pa.table({**view, **(extra or {})}), mask)
        add_found(partial["found"], name, count, [example(r["pidx"], r["seq"], detail(r)) for r in rows])

    clusters = plan.clusters
    check(
        "lost",
        pc.and_(n_ok, pc.invert(stored_where)),
        lambda r: {"cluster": clusters[r["ok_cid"]] if r["ok_cid"] is not None else None, "ok_ts": r["ok_ts"]},
        {"ok_cid": ok_cid, "ok_ts": c["ok_ts"]},
    )
    check(
        "unexpected",
        pc.and_(pc.invert(n_invoke), stored_any),
        lambda r: {
            "stored_on": [x for i, x in enumerate(clusters) if r["read_bits"] >> i & 1],
            "delivered_on": [x for i, x in enumerate(clusters) if r["recv_bits"] >> i & 1],
        },
        {"read_bits": read_bits, "recv_bits": recv_bits},
    )
    check("recovered", pc.and_(uncertain, stored_any), lambda r: {})
    check("failed_but_stored", pc.and_(failed, stored_any), lambda r: {})
    for i, cluster in enumerate(clusters):
        dup = pc.not_equal(c[f"idmin_{i}"], c[f"idmax_{i}"])
        check("duplicated_in_storage", dup, lambda r, cluster=cluster: {"cluster": cluster})
    for j, (cluster, sub) in enumerate(plan.subs):
        labels = {"cluster": cluster, "subscription": sub}
        if plan.never[j]:
            mine = pc.is_in(c["pidx"], pa.array(plan.never[j], pa.int64()))
            never = pc.and_(pc.and_(mine, _bit(read_bits, clusters.index(cluster))), c[f"recv_first_{j}"].is_null())
            check("never_delivered", never, lambda r, labels=labels: dict(labels))
        again = pc.greater(c[f"recv_last_{j}"], c[f"ack_first_{j}"])
        check(
            "duplicated_delivery",
            again,
            lambda r, labels=labels: {**labels, "first_ack_ts": r["ack"], "last_receive_ts": r["last"]},
            {"ack": c[f"ack_first_{j}"], "last": c[f"recv_last_{j}"]},
        )

    # -- latencies
    invoke_ts = c["invoke_ts"]
    pub = pc.subtract(c["ok_ts"], invoke_ts).filter(_true(pc.and_(n_ok, pc.and_(c["ok_ts"].is_valid(), invoke_ts.is_valid()))))
    firsts = [c[f"recv_first_{j}"] for j in range(len(plan.subs))]
    if firsts:
        first_recv = firsts[0] if len(firsts) == 1 else pc.min_element_wise(*firsts, skip_nulls=True)
        e2e = pc.subtract(first_recv, pc.coalesce(c["publish_ts"], invoke_ts)).drop_null()
    else:
        e2e = pa.array([], pa.int64())
    for name, values in (("pub", pub), ("e2e", e2e)):
        if len(values):
            partial["hist"][name].append(_histogram(values))
            _minmax(partial, f"max_{name}", values, "max")

    # -- rows for the second exchange
    for i in range(len(clusters)):
        position = c[f"position_{i}"]
        if position.null_count == len(position):
            continue
        partition = pc.cast(pc.subtract(pc.shift_right(position, POSITION_BITS), 1), pa.int32())
        rows = pa.table({"pidx": c["pidx"], "a": partition, "order": pc.bit_wise_and(position, _POSITION_MASK), "seq": c["seq"]})
        rows = rows.filter(position.is_valid())
        yield from _routed(rows, ("producer", i), plan)
    for j in range(len(plan.subs)):
        first = c[f"recv_first_{j}"]
        if first.null_count == len(first):
            continue
        rows = pa.table({"pidx": c["pidx"], "a": c[f"consumer_{j}"], "b": c["key_hash"], "order": first, "seq": c["seq"]})
        rows = rows.filter(first.is_valid())
        yield from _routed(rows, ("key", j), plan)
    oks = c["ok_ts"].drop_null()
    if len(oks):
        offset = pc.subtract(oks, plan.gap_lo)
        bucket = pc.max_element_wise(pc.min_element_wise(pc.divide(offset, plan.gap_width), plan.gap_buckets - 1), 0)
        bucket = pc.if_else(pc.less(offset, 0), 0, bucket)  # integer division truncates toward zero
        for b in pc.unique(bucket).to_pylist():
            yield _out(plan.routes[b % len(plan.routes)], ("gap", b, oks.filter(pc.equal(bucket, b))))


def _routed(rows: pa.Table, what: tuple[str, int], plan: Plan) -> Iterator[pa.RecordBatch]:
    """Order rows, one batch per producer (without the pidx column): the rows of a producer go to
    one partition, the producers of a check round-robin over the partitions."""
    n, width = len(plan.routes), 2 * max(len(plan.clusters), len(plan.subs), 1)
    pidx = rows.column("pidx")
    rest = rows.drop_columns(["pidx"])
    for p in pc.unique(pidx).to_pylist():
        route = plan.routes[(p * width + 2 * what[1] + (what[0] == "key")) % n]
        yield _out(route, (what[0], what[1], p, rest.filter(pc.equal(pidx, p))))


def spark_partition(value: int, partitions: int) -> int:
    """The partition Spark's hash partitioning puts a long column's ``value`` in: Murmur3 (x86,
    32 bits, seed 42) of the value's two halves, modulo ``partitions``."""

    def mix(h: int, k: int) -> int:
        k = k * 0xCC9E2D51 & 0xFFFFFFFF
        k = (k << 15 | k >> 17) & 0xFFFFFFFF
        h ^= k * 0x1B873593 & 0xFFFFFFFF
        h = (h << 13 | h >> 19) & 0xFFFFFFFF
        return (h * 5 + 0xE6546B64) & 0xFFFFFFFF

    h = mix(mix(42, value & 0xFFFFFFFF), value >> 32 & 0xFFFFFFFF) ^ 8
    h = (h ^ h >> 16) * 0x85EBCA6B & 0xFFFFFFFF
    h = (h ^ h >> 13) * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return (h - (1 << 32) if h >= 1 << 31 else h) % partitions


def routes(partitions: int) -> tuple[int, ...]:
    """For each partition of a ``partitions``-way hash exchange, a value that lands in it."""
    found: dict[int, int] = {}
    value = 0
    while len(found) < partitions:
        found.setdefault(spark_partition(value, partitions), value)
        value += 1
    return tuple(found[p] for p in range(partitions))


# -- second exchange ----------------------------------------------------------------------------
def resolve(plan: Plan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of the second reduce task: order violations per producer, gaps per time bucket."""
    tables: dict[tuple[Any, ...], list[Any]] = {}
    for batch in batches:
        for route, payload in zip(batch.column("route").to_pylist(), batch.column("payload").to_pylist(), strict=True):
            if route == PARTIAL:
                yield pa.record_batch({"route": pa.array([route], pa.int64()), "payload": pa.array([payload])})
                continue
            *what, rows = pickle.loads(payload)
            tables.setdefault(tuple(what), []).append(rows)
    for what, parts in tables.items():
        if what[0] == "gap":
            yield _out(PARTIAL, {"gaps": [_bucket_gaps(what[1], pa.concat_arrays(parts))]})
        else:
            kind, idx, pidx = what
            yield _out(PARTIAL, {"found": _violations(plan, kind, idx, pa.concat_tables(parts), pidx)})


def _bucket_gaps(bucket: int, values: pa.Array) -> tuple[int, int, int, list[Gap]]:
    """(bucket, first, last, the two longest gaps as (gap, from, to), the earliest first on ties)."""
    t = pc.sort_indices(values)
    v = values.take(t)
    top: list[Gap] = []
    if len(v) > 1:
        prev, cur = v.slice(0, len(v) - 1), v.slice(1)
        gaps = pc.subtract(cur, prev)
        for _ in range(2):
            best = pc.max(gaps).as_py()
            if best is None:
                break
            at = pc.index(gaps, best).as_py()
            top.append((best, prev[at].as_py(), cur[at].as_py()))
            gaps = pa.concat_arrays([gaps.slice(0, at), pa.nulls(1, gaps.type), gaps.slice(at + 1)])
    return bucket, v[0].as_py(), v[len(v) - 1].as_py(), top


def _violations(plan: Plan, kind: str, idx: int, rows: pa.Table, pidx: int | None = None) -> dict[str, list[Any]]:
    """Within each (producer, a, b) group, in (order, seq) order: a seq below the previous one.

    ``rows`` has a ``pidx`` column, or all are of producer ``pidx``; ``b`` may be left out (all 0).
    """
    n = rows.num_rows
    if n < 2:
        return {}
    group, rows = _grouped(rows)
    cur, prev = rows.slice(1), rows.slice(0, n - 1)
    same = pc.equal(group.slice(1), group.slice(0, n - 1))
    back = _true(pc.and_(same, pc.less(cur.column("seq"), prev.column("seq"))))
    count = pc.sum(back).as_py() or 0
    if not count:
        return {}
    hits = cur.filter(back).append_column("prev_seq", prev.column("seq").filter(back))
    if "pidx" not in hits.column_names:
        hits = hits.append_column("pidx", pa.repeat(pa.scalar(pidx, pa.int64()), hits.num_rows))
    cluster, sub = (plan.clusters[idx], None) if kind == "producer" else plan.subs[idx]
    out = []
    for r in _first(hits, pa.repeat(True, hits.num_rows)):  # a message is in one group of a check
        if kind == "producer":
            detail = {"cluster": cluster, "partition": r["a"], "prev_seq": r["prev_seq"], "read_index": r["order"]}
        else:
            consumer = plan.consumers[r["a"]] if r["a"] is not None else None
            detail = {
                "cluster": cluster,
                "subscription": sub,
                "consumer": consumer,
                "prev_seq": r["prev_seq"],
                "first_receive_ts": r["order"],
            }
        out.append(example(r["pidx"], r["seq"], detail))
    found: dict[str, list[Any]] = {}
    add_found(found, f"order_violations_{kind}", count, out)
    return found


def _grouped(rows: pa.Table) -> tuple[pa.Array, pa.Table]:
    """The rows sorted by their group columns (pidx, a, b; nulls are values too), then (order, seq),
    null seqs last, and a number per group: one sort of packed longs when everything fits in 63 bits."""
    names = [name for name in ("pidx", "a", "b") if name in rows.column_names]
    codes = [pc.dictionary_encode(rows.column(name).combine_chunks()) for name in names]
    sizes = [len(c.dictionary) + 1 for c in codes]
    order, seq = rows.column("order").combine_chunks(), rows.column("seq").combine_chunks()
    o_lo, o_hi = (x.as_py() for x in pc.min_max(order).values())
    s_lo, s_hi = (x.as_py() or 0 for x in pc.min_max(seq).values())
    widths = [(math.prod(sizes) - 1).bit_length(), (o_hi - o_lo).bit_length(), (s_hi - s_lo + 1).bit_length()]
    if sum(widths) > 63:  # several sort keys, groups told apart by comparing neighbours
        keys = [*((name, "at_start") for name in names), ("order", "at_end"), ("seq", "at_end")]
        rows = rows.take(sort_indices(rows, keys))
        n = rows.num_rows
        new = pa.repeat(False, n - 1)
        for name in names:
            x, y = rows.column(name).slice(1).combine_chunks(), rows.column(name).slice(0, n - 1).combine_chunks()
            both_null = pc.and_(x.is_null(), y.is_null())
            new = pc.or_(new, pc.invert(pc.or_kleene(pc.equal(x, y), both_null).fill_null(False)))
        return pc.cumulative_sum(pa.concat_arrays([pa.array([0], pa.int64()), pc.cast(new, pa.int64())])), rows
    group = pa.repeat(pa.scalar(0, pa.int64()), rows.num_rows)
    for c, size in zip(codes, sizes, strict=True):
        group = pc.add(pc.multiply(group, size), pc.cast(c.indices.fill_null(size - 1), pa.int64()))
    seq_code = pc.subtract(seq, s_lo).fill_null(s_hi - s_lo + 1)
    packed = pc.add(pc.shift_left(pc.subtract(order, o_lo), widths[2]), seq_code)
    indices = pc.sort_indices(pc.add(pc.shift_left(group, widths[1] + widths[2]), packed))
    return group.take(indices), rows.take(indices)


# -- on the driver ------------------------------------------------------------------------------
def merge(results: list[Any]) -> dict[str, Any]:
    """All partial results together."""
    total: dict[str, Any] = {name: 0 for name in _COUNTED}
    total.update(found={}, minmax={}, gaps=[], hist={"pub": ([], []), "e2e": ([], [])})
    hist: dict[str, dict[int, int]] = {"pub": {}, "e2e": {}}
    for r in results:
        for name in _COUNTED:
            total[name] += r.get(name, 0)
        for name, (count, examples) in r.get("found", {}).items():
            add_found(total["found"], name, count, examples)
        for name, value in r.get("minmax", {}).items():
            old = total["minmax"].get(name)
            use = min if name.startswith("min") else max
            total["minmax"][name] = value if old is None else use(old, value)
        total["gaps"] += r.get("gaps", [])
        for name, (keys, counts) in r.get("hist", {}).items():
            h = hist[name]
            for k, n in zip(keys, counts, strict=True):
                h[k] = h.get(k, 0) + n
    total["hist"] = hist
    return total


def percentiles(hist: dict[int, int], maximum: int | None) -> dict[str, float | None]:
    """p50/p95/p99/p99.9 (nearest rank) and max of latencies in ns, in ms to the microsecond."""
    names = ("p50", "p95", "p99", "p99_9")
    out: dict[str, float | None] = dict.fromkeys(names)
    n = sum(hist.values())
    if n:
        keys = sorted(hist)
        for name, p in zip(names, PERCENTILES, strict=True):
            rank, seen = max(math.ceil(p * n), 1), 0
            for k in keys:
                seen += hist[k]
                if seen >= rank:
                    out[name] = round(k * 500 / 1e6, 3)
                    break
    out["max"] = round(maximum / 1e6, 3) if maximum is not None else None
    return out


def longest_gap(buckets: list[tuple[int, int, int, list[Gap]]], first_invoke: int, last_send: int) -> dict[str, Any]:
    """The longest interval without an ack from the buckets' first/last ack and longest inner gaps,
    with the run's first invoke and last send event as two more points."""
    segments = [[lo, hi, list(top)] for _, lo, hi, top in sorted(buckets)]
    for p in (first_invoke, last_send):
        inside = next((s for s in segments if s[0] < p < s[1]), None)
        if inside is None:
            segments.append([p, p, []])
            continue
        top = inside[2]
        if top and top[0][1] <= p <= top[0][2]:  # the point splits the bucket's longest gap
            g, a, b = top[0]
            inside[2] = [(p - a, a, p), (b - p, p, b), *top[1:]]
    segments.sort(key=lambda s: (s[0], s[1]))
    best: tuple[int, int, int] | None = None
    candidates = [(g, a, b) for s in segments for g, a, b in s[2]]
    candidates += [(nxt[0] - cur[1], cur[1], nxt[0]) for cur, nxt in zip(segments, segments[1:], strict=False)]
    for g, a, b in candidates:
        key = (g, -a, b)
        best = key if best is None or key > best else best
    if best is None:
        return {"seconds": 0.0, "from_ts": first_invoke, "to_ts": first_invoke}
    return {"seconds": best[0] / 1e9, "from_ts": -best[1], "to_ts": best[2]}
