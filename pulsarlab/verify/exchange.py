"""The second exchange: each route's rows sorted once, for order violations (per producer) and the
longest gap without an ack (per time bucket); and how route values are chosen so Spark's hash
partitioning delivers each to the partition it stands for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pulsarlab.verify.events import distinct
from pulsarlab.verify.plan import (
    PARTIAL,
    UNEXPECTED,
    Gap,
    Plan,
    add_found,
    add_unexpected,
    example,
    first_rows,
    routed_row,
    sort_indices,
    true_only,
    unpacked,
)


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
            *what, rows = unpacked(payload)
            tables.setdefault(tuple(what), []).append(rows)
    for what in list(tables):
        parts = tables.pop(what)  # each group's rows freed once it is judged
        if what[0] == UNEXPECTED:  # every task's deliveries without a producer, counted once
            found: dict[str, list[Any]] = {}
            add_unexpected(found, distinct(pa.concat_tables(parts)))
            yield routed_row(PARTIAL, {"found": found})
        elif what[0] == "gap":
            yield routed_row(PARTIAL, {"gaps": [_bucket_gaps(what[1], pa.concat_arrays(parts))]})
        else:
            kind, idx, pidx = what
            yield routed_row(PARTIAL, {"found": violations(plan, kind, idx, pa.concat_tables(parts), pidx)})


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


def violations(plan: Plan, kind: str, idx: int, rows: pa.Table, pidx: int | None = None) -> dict[str, list[Any]]:
    """Within each (producer, a, b) group, in (order, seq) order: a seq below the previous one.

    ``rows`` has a ``pidx`` column, or all are of producer ``pidx``; ``b`` may be left out (all 0).
    """
    n = rows.num_rows
    if n < 2:
        return {}
    group, rows = _grouped(rows)
    cur, prev = rows.slice(1), rows.slice(0, n - 1)
    same = pc.equal(group.slice(1), group.slice(0, n - 1))
    back = true_only(pc.and_(same, pc.less(cur.column("seq"), prev.column("seq"))))
    count = pc.sum(back).as_py() or 0
    if not count:
        return {}
    hits = cur.filter(back).append_column("prev_seq", prev.column("seq").filter(back))
    if "pidx" not in hits.column_names:
        hits = hits.append_column("pidx", pa.repeat(pa.scalar(pidx, pa.int64()), hits.num_rows))
    cluster, sub = (plan.clusters[idx], None) if kind == "producer" else plan.subs[idx]
    out = []
    for r in first_rows(hits, pa.repeat(True, hits.num_rows)):  # a message is in one group of a check
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
    if sum(widths) > 63 and widths[0] + widths[1] <= 63 and not order.null_count:
        # two stable sorts of one long each: by seq, then by (group, order), ties staying in seq order
        group = _group_codes(codes, sizes, rows.num_rows)
        by_seq = pc.sort_indices(pc.subtract(seq, s_lo).fill_null(s_hi - s_lo + 1))
        outer = pc.add(pc.shift_left(group, widths[1]), pc.subtract(order, o_lo)).take(by_seq)
        indices = by_seq.take(pc.sort_indices(outer))
        return group.take(indices), rows.take(indices)
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
    group = _group_codes(codes, sizes, rows.num_rows)
    seq_code = pc.subtract(seq, s_lo).fill_null(s_hi - s_lo + 1)
    packed = pc.add(pc.shift_left(pc.subtract(order, o_lo), widths[2]), seq_code)
    indices = pc.sort_indices(pc.add(pc.shift_left(group, widths[1] + widths[2]), packed))
    return group.take(indices), rows.take(indices)


def _group_codes(codes: list[pa.DictionaryArray], sizes: list[int], n: int) -> pa.Array:
    """One number per row for its (pidx, a, b) group, nulls a value of their own."""
    group = pa.repeat(pa.scalar(0, pa.int64()), n)
    for c, size in zip(codes, sizes, strict=True):
        group = pc.add(pc.multiply(group, size), pc.cast(c.indices.fill_null(size - 1), pa.int64()))
    return group
