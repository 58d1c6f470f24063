"""The map side of the verifier: history rows to narrow numeric events, with pyarrow on the executors.

Each Spark task reads a few row groups of one part file with pyarrow (:mod:`.reading`) and turns
every row into five 64-bit integers here. Strings become small integer codes by looking up each
batch's dictionary (a few distinct values) instead of comparing every row; keys and message ids
become 64-bit hashes, computed over whole columns at once. Nothing here imports Spark or the rest
of pulsarlab: the module is shipped to executors by value, so they need pyarrow only.

An event row:

- ``mkey``: the message, ``producer index << 40 | seq`` (or ``pidx`` and ``seq`` columns when a
  seq does not fit in 40 bits);
- ``tag``: ``opc | cid << 4 | (sid + 1) << 10 | (consumer + 1) << 32`` -- the op and send outcome,
  the cluster (63 when unknown), the subscription and the consumer (0 when none);
- ``a``: ``ts``, except on reads: the hash of ``message_id``;
- ``b``: the hash of ``key`` on send invokes and receives, ``(partition + 1) << 40 | read_index``
  on reads, else null;
- ``c``: ``publish_ts``;
- ``d``: the hash of ``payload_hash`` on send invokes, receives and reads, else null.

An ack whose ``type`` is ``fail`` is not an acknowledgement: it becomes op code 0 (ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

SEQ_BITS = 40  # a message is producer index << 40 | seq
NO_SEQ = (1 << SEQ_BITS) - 1  # stands for a null seq in a message key
POSITION_BITS = 40  # a stored position is (partition + 1) << 40 | read_index
BLOCK_BITS = 10  # messages go to reduce tasks in blocks of 1,024 consecutive seqs of a producer
OPS = ("invoke", "ok", "info", "fail", "receive", "ack", "nack", "read")
OP_CODE = {name: code for code, name in enumerate(OPS, start=1)}  # 0: an op/type pair the verifier ignores
SEND_TYPES = ("invoke", "ok", "info", "fail")
NO_CLUSTER = 63  # the cid of a row whose cluster is not one of the history's (a null among several)
CID_SHIFT, SID_SHIFT, CONSUMER_SHIFT = 4, 10, 32
SID_MASK = (1 << (CONSUMER_SHIFT - SID_SHIFT)) - 1
BATCH_ROWS = 1 << 18  # rows encoded (and handed to Spark) at a time
NULL_HASH = 42  # the hash of a null string (as Spark's xxhash64 of null: its seed)
_PARTITION = re.compile(r"-partition-([0-9]{1,9})$")
_M0, _M1, _M2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def partition_of(topic: str | None) -> int:
    """``...-partition-3`` -> 4, an unpartitioned topic (or none) -> 0."""
    m = _PARTITION.search(topic or "")
    return int(m.group(1)) + 1 if m else 0


# -- hashing ------------------------------------------------------------------------------------
def _u64(x: int) -> pa.Scalar:
    return pa.scalar(x, pa.uint64())


def _mix(h: pa.Array) -> pa.Array:
    """A 64-bit finalizer (splitmix64's): every input bit flips about half the output bits."""
    h = pc.multiply(pc.bit_wise_xor(h, pc.shift_right(h, _u64(30))), _u64(_M1))
    h = pc.multiply(pc.bit_wise_xor(h, pc.shift_right(h, _u64(27))), _u64(_M2))
    return pc.bit_wise_xor(h, pc.shift_right(h, _u64(31)))


def _hash_lanes(values: pa.Array, lanes: int) -> pa.Array:
    """Hash non-null strings of at most ``8 * lanes`` bytes: each is zero-padded to that width, its
    bytes read as ``lanes`` 64-bit words and folded in with the length."""
    n = len(values)
    width = 8 * lanes
    padded = pc.ascii_rpad(values, width=width, padding="\0")  # pads bytes, not characters
    offsets = pa.Array.from_buffers(pa.int32(), n + 1, [None, padded.buffers()[1]], offset=padded.offset)
    start = offsets[0].as_py()
    words = pa.Array.from_buffers(pa.uint64(), n * lanes, [None, padded.buffers()[2].slice(start, n * width)])
    grid = pa.FixedSizeListArray.from_arrays(words, lanes) if lanes > 1 else None
    h = pc.multiply(pc.cast(pc.binary_length(values), pa.uint64()), _u64(_M0))
    for j in range(lanes):
        word = pc.list_element(grid, j) if grid is not None else words
        h = _mix(pc.add(pc.bit_wise_xor(h, word), _u64(_M0)))
    return h.view(pa.int64())


def hash64(values: pa.Array) -> pa.Array:
    """A 64-bit hash of every string (or binary) value, vectorised; null hashes to ``NULL_HASH``.

    A string's hash depends on its bytes only, not on the other values of the array.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        return pc.take(hash64(values.dictionary), values.indices).fill_null(NULL_HASH)
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary()) if not pa.types.is_string(values.type) else values
    n = len(values)
    if n == 0:
        return pa.array([], pa.int64())
    valid = values.drop_null() if values.null_count else values
    if len(valid) == 0:
        return pa.repeat(pa.scalar(NULL_HASH, pa.int64()), n)
    nlanes = pc.shift_right(pc.add(pc.binary_length(valid), 7), 3)
    lo, hi = pc.min_max(nlanes).values()
    lo, hi = max(lo.as_py(), 1), max(hi.as_py(), 1)
    if lo == hi:
        hashed = _hash_lanes(valid, hi)
    else:  # one pass per length class, so a long outlier does not widen every other value
        order, parts = [], []
        for k in range(lo, hi + 1):
            where = pc.cast(pc.indices_nonzero(pc.equal(pc.max_element_wise(nlanes, 1), k)), pa.int64())
            if len(where):
                order.append(where)
                parts.append(_hash_lanes(valid.take(where), k))
        hashed = pc.take(pa.concat_arrays(parts), pc.inverse_permutation(pa.concat_arrays(order)))
    if not values.null_count:
        return hashed
    slots = pc.subtract(pc.cumulative_sum(pc.cast(values.is_valid(), pa.int64())), 1)
    return pc.if_else(values.is_valid(), pc.take(hashed, pc.max_element_wise(slots, 0)), pa.scalar(NULL_HASH, pa.int64()))


# -- encoding -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Context:
    """What every task needs of the dimensions (small, sent with the task)."""

    producers: tuple[str, ...]
    clusters: tuple[str, ...]
    subs: tuple[tuple[str, str], ...]
    consumers: tuple[str, ...]
    one_key: bool
    anonymous: bool = False  # the history has receive or read rows without a producer: gather them


def _dictionary(table: pa.RecordBatch, name: str) -> pa.DictionaryArray | None:
    if name not in table.schema.names:
        return None
    col = table.column(name)
    return col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col)


def _codes(col: pa.DictionaryArray | None, n: int, lookup: dict[Any, int], default: int | None = None) -> pa.Array:
    """Each row's code: ``lookup`` applied to the batch's few distinct values (null looks up None)."""
    if col is None:
        return pa.repeat(pa.scalar(lookup.get(None, default), pa.int64()), n)
    table = pa.array([lookup.get(v, default) for v in col.dictionary.to_pylist()], pa.int64())
    codes = pc.take(table, col.indices)
    none = lookup.get(None, default)
    return codes.fill_null(none) if none is not None and col.null_count else codes


def _opc(batch: pa.RecordBatch, op: str | None) -> pa.Array:
    n = batch.num_rows
    send = -1
    op_codes = {"send": send, **{o: OP_CODE[o] for o in ("receive", "ack", "nack", "read")}}
    if op is not None:
        code = op_codes.get(op, 0)
        if code != send:
            return _failed_acks(batch, pa.repeat(pa.scalar(code, pa.int64()), n))
        return _codes(_dictionary(batch, "type"), n, {t: OP_CODE[t] for t in SEND_TYPES}, 0)
    ops = _codes(_dictionary(batch, "op"), n, op_codes, 0)
    kinds = _codes(_dictionary(batch, "type"), n, {t: OP_CODE[t] for t in SEND_TYPES}, 0)
    return _failed_acks(batch, pc.if_else(pc.equal(ops, send), kinds, ops))


def _failed_acks(batch: pa.RecordBatch, opc: pa.Array) -> pa.Array:
    """Op code 0 for acks whose type says they failed (a null type is an ack of old histories: ok)."""
    types = _dictionary(batch, "type")
    if types is None or "fail" not in types.dictionary.to_pylist():
        return opc
    failed = pc.and_(pc.equal(opc, OP_CODE["ack"]), pc.equal(_codes(types, batch.num_rows, {"fail": 1}, 0), 1))
    return pc.if_else(failed, 0, opc)


def _sid(batch: pa.RecordBatch, ctx: Context) -> pa.Array:
    """The subscription id of each row from (cluster, subscription); null when none matches."""
    n = batch.num_rows
    if len(ctx.subs) <= 1:
        return pa.repeat(pa.scalar(0 if ctx.subs else None, pa.int64()), n)
    index = {s: j for j, s in enumerate(ctx.subs)}
    clusters, subs = _dictionary(batch, "cluster"), _dictionary(batch, "subscription")
    cvals = clusters.dictionary.to_pylist() + [None] if clusters is not None else [None]
    svals = subs.dictionary.to_pylist() + [None] if subs is not None else [None]
    one_cluster = len(ctx.clusters) == 1
    pairs = [index.get((ctx.clusters[0] if one_cluster else (c or ""), s or "")) for c in cvals for s in svals]
    ccode = clusters.indices.fill_null(len(cvals) - 1) if clusters is not None else pa.repeat(pa.scalar(0, pa.int32()), n)
    scode = subs.indices.fill_null(len(svals) - 1) if subs is not None else pa.repeat(pa.scalar(0, pa.int32()), n)
    pair = pc.add(pc.multiply(pc.cast(ccode, pa.int64()), len(svals)), pc.cast(scode, pa.int64()))
    return pc.take(pa.array(pairs, pa.int64()), pair)


def _hashed_where(mask: pa.Array, values: pa.Array, otherwise: pa.Array) -> pa.Array:
    """:func:`hash64` of ``values`` where ``mask`` holds, ``otherwise`` elsewhere: only those
    values are hashed (a consumer's rows hold message ids that only reads need hashed)."""
    count = pc.sum(mask).as_py() or 0
    if count == 0:
        return otherwise
    if count == len(mask):
        return hash64(values)
    where = pc.cast(pc.indices_nonzero(mask), pa.int64())
    return pc.coalesce(pc.scatter(hash64(values.take(where)), where, max_index=len(mask) - 1), otherwise)


def encode(batch: pa.RecordBatch, ctx: Context, op: str | None = None) -> pa.RecordBatch:
    """The event rows of one batch of history rows (rows without a producer are dropped)."""
    pidx = _codes(_dictionary(batch, "producer"), batch.num_rows, {p: i for i, p in enumerate(ctx.producers)})
    if pidx.null_count:
        batch = batch.filter(pidx.is_valid())
        pidx = pidx.drop_null()
    n = batch.num_rows
    names = batch.schema.names

    def column(name: str) -> pa.Array:
        return batch.column(name) if name in names else pa.nulls(n, pa.int64())

    opc = _opc(batch, op)
    if len(ctx.clusters) > 1:
        lookup: dict[Any, int] = {c: i for i, c in enumerate(ctx.clusters)}
        cid = _codes(_dictionary(batch, "cluster"), n, lookup, NO_CLUSTER)
        cid = cid.fill_null(NO_CLUSTER) if cid.null_count else cid
    else:
        cid = pa.repeat(pa.scalar(0, pa.int64()), n)
    tag = pc.add(opc, pc.shift_left(cid, CID_SHIFT))
    delivery = pc.or_(pc.equal(opc, OP_CODE["receive"]), pc.equal(opc, OP_CODE["ack"]))
    receive, read = pc.equal(opc, OP_CODE["receive"]), pc.equal(opc, OP_CODE["read"])
    if "subscription" in names:
        sid = _sid(batch, ctx)
        sid = pc.if_else(delivery, pc.add(sid.fill_null(-1), 1), 0)
        tag = pc.add(tag, pc.shift_left(sid, SID_SHIFT))
    if "consumer" in names:
        consumer = _codes(_dictionary(batch, "consumer"), n, {c: i for i, c in enumerate(ctx.consumers)})
        consumer = pc.if_else(receive, pc.add(consumer.fill_null(-1), 1), 0)
        tag = pc.add(tag, pc.shift_left(consumer, CONSUMER_SHIFT))
    a = column("ts")
    b = pa.nulls(n, pa.int64())
    if "key" in names:
        b = _hashed_where(pc.or_(pc.equal(opc, OP_CODE["invoke"]), receive), batch.column("key"), b)
    if "message_id" in names and pc.any(read).as_py():
        a = _hashed_where(read, batch.column("message_id"), a)
        topics = _dictionary(batch, "topic")
        partitions = {t: partition_of(t) for t in topics.dictionary.to_pylist()} if topics is not None else {}
        part = _codes(topics, n, {None: 0, **partitions}, 0)
        position = pc.add(pc.shift_left(part, POSITION_BITS), column("read_index"))
        b = pc.if_else(read, position, b)
    d = pa.nulls(n, pa.int64())
    if "payload_hash" in names:
        hashed = pc.or_(pc.or_(pc.equal(opc, OP_CODE["invoke"]), receive), read)
        d = _hashed_where(pc.and_(hashed, batch.column("payload_hash").is_valid()), batch.column("payload_hash"), d)
    seq = column("seq")
    key = {"mkey": pc.add(pc.shift_left(pidx, SEQ_BITS), seq.fill_null(NO_SEQ))} if ctx.one_key else {"pidx": pidx, "seq": seq}
    return pa.record_batch({**key, "tag": tag, "a": a, "b": b, "c": column("publish_ts"), "d": d})


def message_part(events: pa.Table, parts: int) -> pa.Array:
    """Which of ``parts`` reduce tasks handles each event's message: a multiplicative hash of its
    block (:data:`BLOCK_BITS`) when messages have one key, else of the message."""

    def u64(name: str) -> pa.Array:
        return events.column(name).combine_chunks().fill_null(-1).view(pa.uint64())

    if "mkey" in events.column_names:
        key = pc.shift_right(u64("mkey"), _u64(BLOCK_BITS))
    else:
        key = pc.add(pc.multiply(u64("pidx"), _u64(_M1)), u64("seq"))
    spread = pc.shift_right(pc.multiply(key, _u64(_M0)), _u64(33))
    return pc.cast(pc.subtract(spread, pc.multiply(pc.divide(spread, _u64(parts)), _u64(parts))), pa.int64())


def split(events: pa.Table, parts: int) -> Iterator[tuple[int, pa.Table]]:
    """``events`` split by :func:`message_part`: (part, its events) for each part that has some."""
    yield from _grouped_by(events, message_part(events, parts))


def split_ops(events: pa.Table, parts: int) -> Iterator[tuple[int, int, pa.Table]]:
    """``events`` split by :func:`message_part` and op code: (part, op code, its events)."""
    opc = pc.bit_wise_and(events.column("tag").combine_chunks(), 15)
    for key, some in _grouped_by(events, pc.add(pc.shift_left(message_part(events, parts), 4), opc)):
        yield key >> 4, key & 15, some


def _grouped_by(events: pa.Table, key: pa.Array) -> Iterator[tuple[int, pa.Table]]:
    order = pc.sort_indices(key)  # one take, then a slice per key
    events, key = events.take(order), key.take(order)
    counts = pc.value_counts(key)
    start = 0
    for k, n in sorted(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True)):
        yield k, events.slice(start, n)
        start += n


def ipc(table: pa.Table) -> pa.Buffer:
    """A table as one compressed Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return sink.getvalue()


def binary(data: pa.Buffer) -> pa.Array:
    """A one-value binary array over ``data``, without copying it."""
    offsets = pa.array([0, data.size], pa.int32()).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, data])


ANONYMOUS = pa.schema([("cluster", pa.string()), ("topic", pa.string()), ("message_id", pa.string())])


def distinct(table: pa.Table) -> pa.Table:
    return table.group_by(ANONYMOUS.names, use_threads=False).aggregate([]).select(ANONYMOUS.names)


def read_blobs(payloads: list[Any]) -> tuple[pa.Table | None, pa.Table | None]:
    """The events of many blobs as one table, and the deliveries without a producer (distinct)."""
    tables = [pa.ipc.open_stream(p).read_all() for p in payloads]
    unknown = [t for t in tables if t.schema.equals(ANONYMOUS)]
    tables = [t for t in tables if not t.schema.equals(ANONYMOUS)]
    return (pa.concat_tables(tables).combine_chunks() if tables else None,
            distinct(pa.concat_tables(unknown)) if unknown else None)


def event_schema(one_key: bool) -> pa.Schema:
    key = [("mkey", pa.int64())] if one_key else [("pidx", pa.int64()), ("seq", pa.int64())]
    return pa.schema([*key, ("tag", pa.int64()), ("a", pa.int64()), ("b", pa.int64()), ("c", pa.int64()), ("d", pa.int64())])
