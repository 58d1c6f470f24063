"""Judging without the big exchange, when the history allows it.

A message's events sit in its producer's part, in the consumers' parts and in the read-back; the
general plan (:mod:`.events`, :mod:`.aggregate`) brings them together with an exchange of every
event. Often the history is already grouped: each cluster's consumers and read-back hold only the
messages of that cluster's producers, each topic has its own. Then the producers fall into groups
whose rows never share a row group, and one task per group can read its row groups and judge its
messages where it read them; only the small second exchange (order checks, gaps) remains.

The groups come from the footers, on the driver: a row group's ``producer`` statistics bound the
producers of its rows, and producers are numbered in name order (:class:`~.dims.Dims`), so a row
group covers an interval of producer numbers; overlapping intervals make one group. A row group
with no producer of the history (deliveries without a producer, other runs' messages) goes to the
lightest task: it is read, so its pages are checked and its deliveries without a producer counted,
as in the general plan.

The plan is used when it keeps every core busy and no task holds too many events; else the
general plan runs. Both give the same verdict (``tests/unit/test_verify_stripes.py``). The task
body, like :mod:`.events`, needs pyarrow only on executors (shipped by value).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from pulsarlab.verify.aggregate import aggregate_ops
from pulsarlab.verify.checks import summarise
from pulsarlab.verify.events import Context, distinct, split_ops
from pulsarlab.verify.exchange import violations
from pulsarlab.verify.plan import CHUNK_ROWS, PARTIAL, UNEXPECTED, Plan, routed_row
from pulsarlab.verify.reading import Unit, read_unit

MAX_ROWS = 32 << 20
"""History rows one task may judge at most: their events are held until judged."""
BYTES_PER_ROW = 88
"""What a task holds at its peak per history row it judges (bench/verify_scale.py, 10 million
messages: 5.3 GiB for two tasks of 25 million rows, the JVM and the driver included)."""
BUCKET_ROWS = 3 << 20
"""Events aggregated at a time within a task (a reduce task of the general plan gets about as many)."""
IMBALANCE = 1.25
"""How much longer than an even share of the work the busiest core may be given."""

Span = tuple[int, int] | None  # a row group's interval of producer numbers; None: no producer of the history


@dataclass(frozen=True)
class Stripe:
    """One task's row groups: every row of the history whose message is one of its producers'."""

    units: tuple[Unit, ...]
    rows: int
    buckets: int


@dataclass(frozen=True)
class Piece:
    """One row group as the planner sees it."""

    file: int
    row_group: int
    rows: int
    span: Span


def producer_span(stats: Any, producers: Sequence[str]) -> Span:
    """The interval of producer numbers (``producers`` sorted) a row group's ``producer``
    statistics allow; every producer without statistics; None when no producer of the history fits."""
    if stats is None or not stats.has_min_max:
        if stats is not None and stats.num_values == 0:
            return None  # every value null (Parquet counts only the values that are not)
        return (0, len(producers) - 1) if producers else None
    lo = bisect.bisect_left(producers, stats.min)
    hi = bisect.bisect_right(producers, stats.max) - 1
    return (lo, hi) if lo <= hi else None


def row_limit(available: int | None, cores: int) -> int:
    """History rows one task may judge: :data:`MAX_ROWS`, or fewer when a task on every core would
    together hold more than half of ``available`` bytes (None: not known here, as for a cluster's
    executors)."""
    if available is None:
        return MAX_ROWS
    return min(MAX_ROWS, available // 2 // (max(cores, 1) * BYTES_PER_ROW))


def groups(spans: Sequence[Span]) -> list[tuple[int, int]]:
    """Overlapping intervals merged: the producer groups whose rows never share a row group."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(s for s in spans if s is not None):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def assign(pieces: Sequence[Piece], cores: int, max_rows: int = MAX_ROWS, tasks: int | None = None) -> list[list[Piece]] | None:
    """The row groups of each task, or None when the general plan is better: fewer producer
    groups than cores, a task over ``max_rows``, or a busiest core past :data:`IMBALANCE` times an
    even share. Groups are packed into at most ``tasks`` tasks (default ``4 * cores``), largest first."""
    found = groups([p.span for p in pieces])
    if len(found) < cores:
        return None
    starts = [lo for lo, _ in found]
    by_group: list[list[Piece]] = [[] for _ in found]
    orphans = []
    for p in pieces:
        if p.span is None:
            orphans.append(p)
        else:
            by_group[bisect.bisect_right(starts, p.span[0]) - 1].append(p)
    weights = [sum(p.rows for p in g) for g in by_group]
    out: list[list[Piece]] = [[] for _ in range(min(len(found), tasks or 4 * cores))]
    loads = [0] * len(out)
    for g in sorted(range(len(found)), key=lambda i: -weights[i]):
        t = loads.index(min(loads))
        out[t] += by_group[g]
        loads[t] += weights[g]
    for p in orphans:
        t = loads.index(min(loads))
        out[t].append(p)
        loads[t] += p.rows
    total = sum(loads)
    if max(loads) > max_rows or _makespan(loads, cores) > IMBALANCE * total / cores:
        return None
    return [t for t in out if t]


def _makespan(loads: Sequence[int], cores: int) -> int:
    """The busiest core's work when tasks go, largest first, to the least busy core."""
    busy = [0] * cores
    for load in sorted(loads, reverse=True):
        busy[busy.index(min(busy))] += load
    return max(busy)


def stripes(pieces: Sequence[Piece], files: Sequence[Unit], cores: int, max_rows: int = MAX_ROWS,
            tasks: int | None = None) -> list[Stripe] | None:
    """:func:`assign` made into tasks: ``files`` holds each file as a unit without row groups."""
    found = assign(pieces, cores, max_rows, tasks)
    if found is None:
        return None
    out = []
    for task in found:
        units: list[Unit] = []
        for p in sorted(task, key=lambda p: (p.file, p.row_group)):
            if units and units[-1].path == files[p.file].path:
                units[-1] = replace(units[-1], row_groups=(*units[-1].row_groups, p.row_group))
            else:
                units.append(replace(files[p.file], row_groups=(p.row_group,)))
        rows = sum(p.rows for p in task)
        out.append(Stripe(tuple(units), rows, max(1, -(-rows // BUCKET_ROWS))))
    return out


# -- the task (on executors) --------------------------------------------------------------------
def judge(stripes: list[Stripe], ctx: Context, plan: Plan, ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of a task: the stripes whose numbers arrive in ``ids`` read and judged, as the
    reduce tasks of the general plan judge theirs; their deliveries without a producer go to the
    second exchange, which counts them once over all tasks."""
    for ids_batch in ids:
        for i in ids_batch.column(0).to_pylist():
            yield from _judge(stripes[i], ctx, plan)


def _judge(stripe: Stripe, ctx: Context, plan: Plan) -> Iterator[pa.RecordBatch]:
    buckets: list[dict[int, list[pa.Table]]] = [{} for _ in range(stripe.buckets)]
    orders: dict[tuple[str, int, int], list[pa.Table]] = {}
    unknown = []
    for unit in stripe.units:
        for events, anonymous in read_unit(unit, ctx):
            if anonymous is not None:
                unknown.append(anonymous)
            # whole messages in each bucket, each op's events apart (the aggregation reduces per op)
            for b, op, some in split_ops(pa.Table.from_batches([events]), stripe.buckets):
                buckets[b].setdefault(op, []).append(some)
    if unknown:
        yield routed_row(plan.routes[0], (UNEXPECTED, distinct(pa.concat_tables(unknown))))
    for b in range(len(buckets)):
        parts, buckets[b] = buckets[b], {}
        if not parts:
            continue
        by_op = {op: pa.concat_tables(tables) for op, tables in parts.items()}
        del parts
        messages = aggregate_ops(by_op, plan)
        del by_op
        yield from summarise(plan, iter(messages.to_batches(max_chunksize=CHUNK_ROWS)), orders=orders)
    for (kind, idx, pidx) in list(orders):  # whole producers here: their order checks too
        rows = pa.concat_tables(orders.pop((kind, idx, pidx)))
        yield routed_row(PARTIAL, {"found": violations(plan, kind, idx, rows, pidx)})
