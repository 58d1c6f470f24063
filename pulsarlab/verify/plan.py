"""What the verifier's reduce tasks share: the plan they are given, examples, and small pyarrow helpers.

Like :mod:`.events`, the modules of the reduce side need pyarrow only on executors (they are
shipped by value).
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pulsarlab.verify.events import (
    NO_SEQ,
    SEQ_BITS,
)

MAX_EXAMPLES = 20
BY_CLUSTER_SEP = "@"  # ``found`` keys ``check@cluster`` hold a check's count on one cluster
PARTIAL = -1  # the route of the partial results: they pass the second exchange untouched
CHUNK_ROWS = 1 << 20
UNEXPECTED = "unexpected"  # the second exchange's group of deliveries without a producer (:mod:`.stripes`)
REPLICATION_HIST = "rep:"  # + a destination cluster: the histogram of its replication delays



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
    # per cluster: producers whose topic replicates there (the run manifest says so) and whose storage view there is scanned
    replicated: tuple[tuple[int, ...], ...] = ()


Example = tuple[tuple[Any, ...], dict[str, Any]]  # (sort key, example)
Gap = tuple[int, int, int]  # (length, from, to)


def add_found(found: dict[str, list[Any]], name: str, count: int, examples: list[Example]) -> None:
    """Add to a check's ``[count, first examples]`` (plain lists: they are pickled on executors)."""
    entry = found.setdefault(name, [0, []])
    entry[0] += count
    entry[1] = sorted(entry[1] + examples, key=lambda e: e[0])[:MAX_EXAMPLES]


def add_unexpected(found: dict[str, list[Any]], unknown: pa.Table) -> None:
    """Count the distinct deliveries without a producer (``events.ANONYMOUS`` rows): unexpected by
    definition, no send can match them."""
    if unknown.num_rows:
        add_found(found, "unexpected", unknown.num_rows, [example(None, None, r) for r in unknown.to_pylist()])


def example(pidx: int | None, seq: int | None, detail: dict[str, Any]) -> Example:
    """One example with the key the verdict orders by: producer, seq (nulls first), then the detail
    as Spark's ``to_json`` writes it (null fields left out)."""
    detail = {k: v for k, v in detail.items() if v is not None}
    text = json.dumps(detail, separators=(",", ":"), ensure_ascii=False)
    return (pidx is not None, pidx or 0, seq is not None, seq or 0, text), detail


# -- helpers ------------------------------------------------------------------------------------
def bit(bits: pa.Array, index: pa.Array | int) -> pa.Array:
    """Whether bit ``index`` is set; false where either is null."""
    if isinstance(index, int):
        out = pc.not_equal(pc.bit_wise_and(bits, 1 << index), 0)
    else:
        shift = index.fill_null(0)
        out = pc.and_(pc.equal(pc.bit_wise_and(pc.shift_right(bits, shift), 1), 1), index.is_valid())
    return out.fill_null(False)


def true_only(mask: pa.Array) -> pa.Array:
    return mask.fill_null(False) if mask.null_count else mask


def first_rows(table: pa.Table, mask: pa.Array, k: int = MAX_EXAMPLES) -> list[dict[str, Any]]:
    """The first ``k`` rows where ``mask`` holds, by (pidx, seq), nulls first."""
    rows = table.filter(mask)
    keys = [("pidx", "at_start"), ("seq", "at_start")]
    if rows.num_rows > 4 * k and not rows.column("pidx").null_count and not rows.column("seq").null_count:
        # the k lowest first, then only those sorted (a row is a message: no two share (pidx, seq))
        rows = rows.take(pc.select_k_unstable(rows, k, sort_keys=[("pidx", "ascending"), ("seq", "ascending")]))
    found: list[dict[str, Any]] = rows.take(sort_indices(rows, keys)[:k]).to_pylist()
    return found


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


def columns_of(t: pa.Table, plan: Plan) -> dict[str, pa.Array]:
    c = {name: t.column(name).combine_chunks() for name in t.column_names}
    if plan.one_key:
        low = pc.bit_wise_and(c["mkey"], NO_SEQ)
        c["pidx"] = pc.shift_right(c["mkey"], SEQ_BITS)
        c["seq"] = pc.if_else(pc.equal(low, NO_SEQ), pa.scalar(None, pa.int64()), low)
    return c


def run_starts(s: pa.Array) -> pa.Array:
    """Where a run of equal values of a sorted array starts."""
    if len(s) == 0:
        return pa.array([], pa.bool_())
    return pa.concat_arrays([pa.array([True]), pc.not_equal(s.slice(1), s.slice(0, len(s) - 1))])


def routed_row(route: int, payload: Any) -> pa.RecordBatch:
    return pa.record_batch({"route": pa.array([route], pa.int64()), "payload": pa.array([packed(payload)])})


def packed(payload: Any) -> bytes:
    """``payload`` pickled and compressed (lz4; Spark does not compress what the job exchanges),
    after its length as 8 bytes."""
    data = pickle.dumps(payload, protocol=5)
    compressed: bytes = pa.compress(data, codec="lz4", asbytes=True)
    return len(data).to_bytes(8, "little") + compressed


def unpacked(data: bytes) -> Any:
    size = int.from_bytes(data[:8], "little")
    return pickle.loads(pa.decompress(data[8:], decompressed_size=size, codec="lz4"))
