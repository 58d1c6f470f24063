"""The reduce side, first step: the events of a task's messages aggregated into one row per message.

Events are sorted by message once; each aggregate is then a scatter into the message's slot (a hash
aggregation only where a message has two rows of a kind).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pulsarlab.verify.checks import summarise
from pulsarlab.verify.events import (
    BLOCK_BITS,
    CID_SHIFT,
    CONSUMER_SHIFT,
    NO_CLUSTER,
    OP_CODE,
    SID_MASK,
    SID_SHIFT,
    read_blobs,
)
from pulsarlab.verify.plan import CHUNK_ROWS, Plan, run_starts


# -- per message --------------------------------------------------------------------------------
def reduce_events(plan: Plan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of the reduce task: the events of its messages (Arrow blobs from the map tasks),
    aggregated per message, then everything :func:`summarise` does (with the deliveries without a
    producer, when this task is the one the map tasks sent them to)."""
    payloads = [blob.as_buffer() for batch in batches for blob in batch.column("payload")]  # no copy
    events, unknown = read_blobs(payloads)
    del payloads
    messages = aggregate(events, plan) if events is not None and events.num_rows else None
    del events
    yield from summarise(plan, iter(messages.to_batches(max_chunksize=CHUNK_ROWS)) if messages is not None else iter(()),
                         unknown)


def aggregate(events: pa.Table, plan: Plan) -> pa.Table:
    """One row per message (the columns the checks read), from its events.

    Each event gets its message's slot: with one key per message, arithmetically (a task holds
    whole blocks of consecutive seqs, see :data:`~pulsarlab.verify.events.BLOCK_BITS`: the slot is
    the block's number in the task and the seq's place in it, no sort); else by sorting. An
    aggregate over the events of one kind is then a scatter into the slots, and a hash aggregation
    of the few events whose message has two such events.
    """
    out: dict[str, pa.Array] = {}
    dense = _dense_slots(events.column("mkey").combine_chunks()) if plan.one_key else None
    if dense is not None:
        seg, m, mkey = dense
    else:
        if plan.one_key:
            key = events.column("mkey").combine_chunks()
        else:  # (pidx, seq) as one long, seq by its rank among this task's seqs
            seqs = pc.dictionary_encode(events.column("seq").combine_chunks())
            codes = pc.cast(seqs.indices.fill_null(len(seqs.dictionary)), pa.int64())
            key = pc.add(pc.shift_left(events.column("pidx").combine_chunks(), 32), codes)
        order = pc.sort_indices(key)
        events, key = events.take(order), key.take(order)
        new = run_starts(key)
        seg = pc.subtract(pc.cumulative_sum(pc.cast(new, pa.int64())), 1)
        firsts = pc.indices_nonzero(new)
        m = len(firsts)
        if plan.one_key:
            out["mkey"] = key.take(firsts)
        else:
            out["pidx"] = events.column("pidx").take(firsts).combine_chunks()
            out["seq"] = events.column("seq").take(firsts).combine_chunks()
    tag = events.column("tag").combine_chunks()
    columns = {"s": seg, "tag": tag, **{x: events.column(x).combine_chunks() for x in ("a", "b", "c", "d")}}
    ev = _ByOp.split(columns, m, ordered=dense is None)
    if dense is None:
        return pa.table(_aggregates(ev, plan, out))
    return _dense_table(ev, plan, seg, mkey)


def aggregate_ops(by_op: dict[int, pa.Table], plan: Plan) -> pa.Table:
    """:func:`aggregate` of events already split by op code (``tag & 15``): no split here."""
    keys = [t.column("mkey").combine_chunks() for t in by_op.values()] if plan.one_key else []
    dense = _dense_slots(pa.concat_arrays(keys)) if keys else None
    if dense is None:
        return aggregate(pa.concat_tables(list(by_op.values())), plan)
    seg, m, mkey = dense
    subsets, start = {}, 0
    for code, t in by_op.items():
        n = t.num_rows
        subsets[code] = {"s": seg.slice(start, n), **{x: t.column(x).combine_chunks() for x in ("tag", "a", "b", "c", "d")}}
        start += n
    return _dense_table(_ByOp(subsets, m, ordered=False), plan, seg, mkey)


def _dense_table(ev: _ByOp, plan: Plan, seg: pa.Array, mkey: Any) -> pa.Table:
    out = _aggregates(ev, plan, {})
    used = ev.present({"s": seg})  # slots of no message (gaps in the seqs) are left out
    at = pc.indices_nonzero(used)
    if len(at) == ev.m:
        return pa.table({"mkey": mkey(at), **out})
    return pa.table({"mkey": mkey(at), **{k: v.filter(used) for k, v in out.items()}})


def _aggregates(ev: _ByOp, plan: Plan, out: dict[str, pa.Array]) -> dict[str, pa.Array]:
    _per_message(ev, plan, out)
    _per_cluster(ev, plan, out)
    _per_subscription(ev, plan, out)
    return out


def _dense_slots(key: pa.Array) -> tuple[pa.Array, int, Any] | None:
    """Each event's slot (its block's number among this task's blocks, then the seq's place in
    the block), the number of slots and how to turn slots back into message keys; None when the
    seqs are too sparse for slots to pay (more than 4 slots per event)."""
    blocks = pc.dictionary_encode(pc.shift_right(key, BLOCK_BITS))
    m = len(blocks.dictionary) << BLOCK_BITS
    if m > 4 * len(key) + (1 << BLOCK_BITS):
        return None
    low = (1 << BLOCK_BITS) - 1
    slots = pc.add(pc.shift_left(pc.cast(blocks.indices, pa.int64()), BLOCK_BITS), pc.bit_wise_and(key, low))
    base = pc.shift_left(blocks.dictionary, BLOCK_BITS)

    def mkey(at: pa.Array) -> pa.Array:
        at = pc.cast(at, pa.int64())
        return pc.add(pc.take(base, pc.shift_right(at, BLOCK_BITS)), pc.bit_wise_and(at, low))

    return slots, m, mkey


class _ByOp:
    """A task's events split by op, and reductions of them to one value per message slot (``m``
    slots). ``ordered``: the events come sorted by slot."""

    def __init__(self, subsets: dict[int, dict[str, pa.Array]], m: int, ordered: bool = True) -> None:
        """``subsets``: op code -> its events' columns (``s``: the slot, ``tag``, ``a`` .. ``d``)."""
        self.m = m
        self.subsets = subsets
        for subset in subsets.values():
            shared = _shared(subset["s"], m, ordered)
            if shared is not None:  # events whose message has another of this op: reduced by hash aggregation
                subset["shared"] = shared
        some = next(iter(subsets.values()))
        self.none = {name: col.slice(0, 0) for name, col in some.items() if name != "shared"}

    @classmethod
    def split(cls, columns: dict[str, pa.Array], m: int, ordered: bool = True) -> _ByOp:
        """The events of every op, split by op code."""
        opc = pc.bit_wise_and(columns["tag"], 15)
        subsets = {}
        for code in pc.unique(opc).to_pylist():
            where = pc.indices_nonzero(pc.equal(opc, code))
            subsets[code] = {name: col.take(where) for name, col in columns.items()}
        return cls(subsets, m, ordered)

    def rows(self, op: str | int, where: Any = None) -> dict[str, pa.Array]:
        """The events of one op (a name or a code), those where ``where(tag)`` holds if given."""
        t = self.subsets.get(OP_CODE.get(op, -1) if isinstance(op, str) else op, self.none)
        if where is None or not len(t["s"]):
            return t
        mask = where(t["tag"])
        return {name: col.filter(mask) for name, col in t.items()}

    def reduce(self, t: dict[str, pa.Array], values: str | pa.Array, how: str) -> pa.Array:
        s, v, shared = t["s"], t[values] if isinstance(values, str) else values, t.get("shared")
        if v.null_count:
            valid = v.is_valid()
            s, v, shared = s.filter(valid), v.drop_null(), shared.filter(valid) if shared is not None else None
        return _scatter_reduce(s, v, how, self.m, shared)

    def present(self, t: dict[str, pa.Array]) -> pa.Array:
        if not len(t["s"]):
            return pa.repeat(False, self.m)
        return pc.scatter(pa.repeat(True, len(t["s"])), t["s"], max_index=self.m - 1).is_valid()

    def bits(self, op: str, indices: range) -> pa.Array:
        """bit_or of ``1 << cid`` over the op's events: one presence test per cluster."""
        total = pa.repeat(pa.scalar(0, pa.int64()), self.m)
        for i in indices:
            here = self.present(self.rows(op, lambda t, i=i: pc.equal(_cid(t), i)))
            total = pc.add(total, pc.if_else(here, 1 << i, 0))
        return total


def _highest(arrays: list[pa.Array]) -> pa.Array:
    return _extreme(arrays, "max")


def _extreme(arrays: list[pa.Array], how: str) -> pa.Array:
    if len(arrays) == 1:
        return arrays[0]
    return (pc.max_element_wise if how == "max" else pc.min_element_wise)(*arrays, skip_nulls=True)


def _per_message(ev: _ByOp, plan: Plan, out: dict[str, pa.Array]) -> None:
    """Which kinds of send event each message has and their times, its payload hashes, where it
    was read and received, and its key."""
    sends = ("invoke", "ok", "info", "fail")
    kinds = pa.repeat(pa.scalar(0, pa.int64()), ev.m)
    for op in sends:
        if OP_CODE[op] in ev.subsets:
            kinds = pc.add(kinds, pc.if_else(ev.present(ev.rows(op)), 1 << OP_CODE[op], 0))
    out["kinds"] = pc.cast(kinds, pa.int32())
    out["invoke_ts"] = ev.reduce(ev.rows("invoke"), "a", "min")
    out["ok_ts"] = ev.reduce(ev.rows("ok"), "a", "min")
    out["last_send_ts"] = _highest([ev.reduce(ev.rows(op), "a", "max") for op in sends])
    ok = ev.rows("ok", lambda t: pc.not_equal(_cid(t), NO_CLUSTER))
    out["ok_cid"] = pc.cast(ev.reduce(ok, _cid(ok["tag"]), "max"), pa.int32())
    out["publish_ts"] = _highest([ev.reduce(ev.rows(code), "c", "max") for code in ev.subsets]
                                 or [pa.nulls(ev.m, pa.int64())])
    # payload hashes: the one recorded at send, the lowest and highest seen in a delivery or in storage
    out["hash_sent"] = ev.reduce(ev.rows("invoke"), "d", "max")
    out["hash_lo"] = _extreme([ev.reduce(ev.rows(op), "d", "min") for op in ("receive", "read")], "min")
    out["hash_hi"] = _highest([ev.reduce(ev.rows(op), "d", "max") for op in ("receive", "read")])
    out["read_bits"] = ev.bits("read", range(len(plan.clusters)))
    out["recv_bits"] = ev.bits("receive", range(len(plan.clusters)))
    out["key_hash"] = _highest([ev.reduce(ev.rows("invoke"), "b", "max"), ev.reduce(ev.rows("receive"), "b", "max")])


def _per_cluster(ev: _ByOp, plan: Plan, out: dict[str, pa.Array]) -> None:
    """Per cluster: the lowest and highest message id read there, and the lowest read position."""
    for i in range(len(plan.clusters)):
        here = ev.rows("read", lambda t, i=i: pc.equal(_cid(t), i))
        out[f"idmin_{i}"] = ev.reduce(here, "a", "min")
        out[f"idmax_{i}"] = ev.reduce(here, "a", "max")
        out[f"position_{i}"] = ev.reduce(here, "b", "min")


def _per_subscription(ev: _ByOp, plan: Plan, out: dict[str, pa.Array]) -> None:
    """Per subscription: first and last receive, first ack, and the consumer of the first delivery."""
    for j in range(len(plan.subs)):
        got = ev.rows("receive", lambda t, j=j: pc.equal(_sid(t), j))
        out[f"recv_first_{j}"] = first = ev.reduce(got, "a", "min")
        out[f"recv_last_{j}"] = ev.reduce(got, "a", "max")
        out[f"ack_first_{j}"] = ev.reduce(ev.rows("ack", lambda t, j=j: pc.equal(_sid(t), j)), "a", "min")
        # the consumer of the first delivery (the lowest numbered when several received it at that time)
        at_first = pc.equal(got["a"], first.take(got["s"])).fill_null(False)
        tied = {name: col.filter(at_first) for name, col in got.items()}
        who = pc.subtract(pc.shift_right(tied["tag"], CONSUMER_SHIFT), 1)
        who = pc.if_else(pc.greater_equal(who, 0), who, pa.scalar(None, pa.int64()))
        out[f"consumer_{j}"] = pc.cast(ev.reduce(tied, who, "min"), pa.int32())


def _cid(tag: pa.Array) -> pa.Array:
    return pc.bit_wise_and(pc.shift_right(tag, CID_SHIFT), 63)


def _sid(tag: pa.Array) -> pa.Array:
    return pc.subtract(pc.bit_wise_and(pc.shift_right(tag, SID_SHIFT), SID_MASK), 1)


def _shared(s: pa.Array, m: int, ordered: bool) -> pa.Array | None:
    """Which events share their slot with another (``s`` sorted when ``ordered``); None when none does."""
    if len(s) < 2:
        return None
    if ordered:
        same = pc.equal(s.slice(1), s.slice(0, len(s) - 1))
        if not pc.any(same).as_py():
            return None
        edge = pa.array([False])
        return pc.or_(pa.concat_arrays([edge, same]), pa.concat_arrays([same, edge]))
    ids = pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), len(s)))
    lost = pc.not_equal(pc.take(pc.scatter(ids, s, max_index=m - 1), s), ids)  # another event took its slot
    if not pc.any(lost).as_py():
        return None
    return pc.is_in(s, value_set=pc.unique(s.filter(lost)))


def _scatter_reduce(s: pa.Array, v: pa.Array, how: str, m: int, shared: pa.Array | None = None) -> pa.Array:
    """``how`` of the values ``v`` per message slot ``s``, as an array of ``m`` slots: a scatter,
    and a hash aggregation of the events marked ``shared`` (their slot may hold several)."""
    if len(s) == 0:
        return pa.nulls(m, v.type)
    out = pc.scatter(v, s, max_index=m - 1)
    if shared is None or not pc.any(shared).as_py():
        return out
    g = pa.table({"s": s.filter(shared), "v": v.filter(shared)}).group_by("s", use_threads=False).aggregate([("v", how)])
    fixed = pc.scatter(g.column(f"v_{how}").combine_chunks(), g.column("s").combine_chunks(), max_index=m - 1)
    return pc.coalesce(fixed, out)
