"""The verifier's pyarrow pieces on their own: hashing, event encoding, percentiles, gaps, order."""

from __future__ import annotations

import math
import pickle
import random

import pyarrow as pa
import pytest

from pulsarlab.verify import aggregate, checks, exchange, merge, reading
from pulsarlab.verify import events as ev
from pulsarlab.verify.plan import Plan


def test_hash64_depends_on_the_bytes_only() -> None:
    values = ["", "a", "a\0", "7:41:-1:-1", "é", "x" * 40, None, "7:41:-1:-1", "x" * 39]
    hashes = ev.hash64(pa.array(values)).to_pylist()
    assert hashes[1] != hashes[2], "a trailing NUL is not padding"
    assert hashes[3] == hashes[7]
    assert hashes[6] == ev.NULL_HASH
    assert len({h for v, h in zip(values, hashes, strict=True) if v is not None}) == 7
    # the same value hashes alike alone, among others of other lengths, and dictionary-encoded
    for i, v in enumerate(values):
        assert ev.hash64(pa.array([v])).to_pylist() == [hashes[i]]
    assert ev.hash64(pa.array(values).dictionary_encode()).to_pylist() == hashes
    assert ev.hash64(pa.array([None, None], pa.string())).to_pylist() == [ev.NULL_HASH] * 2


def test_hash64_spreads_similar_ids() -> None:
    ids = [f"{1000 + k // 7}:{k % 7}:-1:-1" for k in range(20000)]
    assert len(set(ev.hash64(pa.array(ids)).to_pylist())) == len(ids)


def _ctx(**kw: object) -> ev.Context:
    base = {"producers": ("p0", "p1"), "clusters": ("c1", "c2"), "subs": (("c1", "s"), ("c2", "s")), "consumers": ("k0",)}
    return ev.Context(**{**base, **kw}, one_key=True)  # type: ignore[arg-type]


def test_encode_packs_op_cluster_subscription_and_consumer() -> None:
    batch = pa.record_batch(
        {
            "op": ["receive", "ack", "send", "send", "read", "receive"],
            "type": [None, None, "ok", "weird", None, None],
            "producer": ["p1", "p1", "p0", "p0", None, "p0"],
            "seq": [3, 3, None, 1, 9, 2],
            "ts": [10, 11, 12, 13, 14, 15],
            "cluster": ["c2", "c1", None, "c1", "c1", "zz"],
            "subscription": ["s", "s", None, None, None, "s"],
            "consumer": ["k0", "k0", None, None, None, "other"],
            "key": ["k", None, None, None, None, "k"],
            "publish_ts": [1, None, None, None, None, 2],
        }
    )
    out = ev.encode(batch, _ctx()).to_pydict()
    assert len(out["mkey"]) == 5, "the row without a producer is dropped"
    assert out["mkey"][:3] == [1 << ev.SEQ_BITS | 3, 1 << ev.SEQ_BITS | 3, ev.NO_SEQ]
    tag = out["tag"]
    assert [t & 15 for t in tag] == [ev.OP_CODE["receive"], ev.OP_CODE["ack"], ev.OP_CODE["ok"], 0, ev.OP_CODE["receive"]]
    assert [t >> ev.CID_SHIFT & 63 for t in tag] == [1, 0, ev.NO_CLUSTER, 0, ev.NO_CLUSTER]
    assert [(t >> ev.SID_SHIFT & ev.SID_MASK) - 1 for t in tag] == [1, 0, -1, -1, -1]  # "zz" has no subscription "s"
    assert [(t >> ev.CONSUMER_SHIFT) - 1 for t in tag] == [0, -1, -1, -1, -1]  # only receives carry the consumer
    assert out["b"][0] == out["b"][4] == ev.hash64(pa.array(["k"]))[0].as_py()
    assert out["b"][1] is None and out["a"] == [10, 11, 12, 13, 15] and out["c"] == [1, None, None, None, 2]


def test_encode_read_rows_carry_id_hash_and_position() -> None:
    batch = pa.record_batch(
        {
            "producer": ["p0", "p0"],
            "seq": [0, 1],
            "cluster": ["c1", "c1"],
            "topic": ["t-partition-2", "t"],
            "message_id": ["1:2:3:4", None],
            "read_index": [7, None],
        }
    )
    out = ev.encode(batch, _ctx(clusters=("c1",), subs=()), op="read").to_pydict()
    assert [t & 15 for t in out["tag"]] == [ev.OP_CODE["read"]] * 2
    assert out["a"] == [ev.hash64(pa.array(["1:2:3:4"]))[0].as_py(), ev.NULL_HASH]
    assert out["b"] == [3 << ev.POSITION_BITS | 7, None]


def test_percentiles_are_nearest_rank_at_the_printed_resolution() -> None:
    rng = random.Random(7)
    values = [rng.randrange(-2_000_000, 9_000_000) for _ in range(5000)] + [1_500, 2_500, 1_499_500, 3_000_500]
    hist = checks._histogram(pa.array(values, pa.int64())).to_pydict()
    got = merge.percentiles(dict(zip(hist["key"], hist["n"], strict=True)), max(values))
    ordered = sorted(values)
    for name, p in zip(("p50", "p95", "p99", "p99_9"), merge.PERCENTILES, strict=True):
        assert got[name] == round(ordered[max(math.ceil(p * len(values)), 1) - 1] / 1e6, 3)
    assert got["max"] == round(max(values) / 1e6, 3)
    for v in (1_500, 2_500, 1_499_500, -1_500, 499, -499, 500, -500):  # half-way values round like round()
        one = checks._histogram(pa.array([v], pa.int64())).to_pydict()
        assert merge.percentiles(dict(zip(one["key"], one["n"], strict=True)), v)["p50"] == round(v / 1e6, 3)
    assert merge.percentiles({}, None) == dict.fromkeys(("p50", "p95", "p99", "p99_9", "max"))


def _gap_reference(points: list[int]) -> dict[str, object]:
    pts = sorted(points)
    g, a, b = max(((b - a, -a, b) for a, b in zip(pts, pts[1:], strict=False)), default=(0, -pts[0], pts[0]))
    return {"seconds": g / 1e9, "from_ts": -a, "to_ts": b}


@pytest.mark.parametrize("seed", range(30))
def test_longest_gap_from_buckets_matches_a_full_sort(seed: int) -> None:
    rng = random.Random(seed)
    oks = [rng.randrange(1000, 2000) for _ in range(rng.randrange(0, 40))]
    first_invoke = rng.choice([900, 1000, 1500, min(oks, default=1000)])
    last_send = max([*oks, first_invoke, rng.randrange(1000, 2100)])
    width = rng.choice([50, 100, 400, 2000])
    buckets: dict[int, list[int]] = {}
    for t in oks:
        buckets.setdefault(max(min((t - 1000) // width, 7), 0), []).append(t)
    summaries = [exchange._bucket_gaps(b, pa.array(v, pa.int64())) for b, v in buckets.items()]
    got = merge.longest_gap(pickle.loads(pickle.dumps(summaries)), first_invoke, last_send)
    assert got == _gap_reference([*oks, first_invoke, last_send])


def test_order_violations_within_producer_partitions() -> None:
    plan = Plan(("c1",), (("c1", "s"),), ("k0", "k1"), ((),), ((),), True, (0,), 0, 1, 1)
    rows = pa.table(
        {
            "pidx": [0, 0, 0, 0, 1, 1],
            "a": [0, 0, 0, 1, 0, 0],
            "b": [0, 0, 0, 0, 0, 0],
            "order": [10, 20, 30, 5, 1, 2],
            "seq": [0, 2, 1, 0, 5, None],
        }
    )
    found = exchange.violations(plan, "producer", 0, rows)
    count, examples = found["order_violations_producer"]
    assert count == 1
    assert examples[0][1] == {"cluster": "c1", "partition": 0, "prev_seq": 2, "read_index": 30}
    keyed = rows.set_column(1, "a", pa.array([1, 1, 1, None, None, None], pa.int64()))
    count, examples = exchange.violations(plan, "key", 0, keyed)["order_violations_key"]
    assert count == 1 and examples[0][1]["consumer"] == "k1" and examples[0][1]["first_receive_ts"] == 30


def test_order_violations_with_keys_too_wide_to_pack() -> None:
    plan = Plan(("c1",), (("c1", "s"),), ("k0",), ((),), ((),), True, (0,), 0, 1, 1)
    big = 1 << 62
    rows = pa.table(
        {
            "pidx": [0, 0, 0, 0, 0],
            "a": [0, 0, None, None, 0],
            "b": [-big, -big, 5, 5, big],
            "order": [-big, big, 1, 2, 0],
            "seq": [3, 1, 4, 2, 0],
        }
    )
    count, examples = exchange.violations(plan, "key", 0, rows)["order_violations_key"]
    assert count == 2
    assert [e[1]["prev_seq"] for e in examples] == [3, 4]
    assert "consumer" not in examples[1][1]


def _events(rows: list[tuple[int, int, int, int | None, int | None, int | None]], one_key: bool = True) -> pa.Table:
    """Events from (pidx, seq, tag, a, b, c) tuples."""
    pidx, seq, tag, a, b, c = (list(x) for x in zip(*rows, strict=True))
    key = {"mkey": [p << ev.SEQ_BITS | s for p, s in zip(pidx, seq, strict=True)]} if one_key else {"pidx": pidx, "seq": seq}
    d = [None] * len(a)
    return pa.table({**key, "tag": tag, "a": a, "b": b, "c": c, "d": d}, schema=ev.event_schema(one_key))


def _tag(op: str, cid: int = 0, sid: int | None = None, consumer: int | None = None) -> int:
    tag = ev.OP_CODE[op] | cid << ev.CID_SHIFT
    tag |= (sid + 1 if sid is not None else 0) << ev.SID_SHIFT
    return tag | (consumer + 1 if consumer is not None else 0) << ev.CONSUMER_SHIFT


@pytest.mark.parametrize("layout", ["slots", "sorted", "two_columns"])
def test_aggregate_per_message_with_repeated_rows(layout: str) -> None:
    """The same events give the same messages whichever way their slots are found: arithmetic
    slots (dense seqs), a sort (sparse seqs), or a sort of (pidx, seq) columns."""
    one_key = layout != "two_columns"
    plan = Plan(("c1", "c2"), (("c1", "s"), ("c2", "s")), ("k0", "k1"), ((), ()), ((), ()), one_key, (0,), 0, 1, 1)
    rows = [
        (0, 5, _tag("invoke"), 100, 7, None),
        (0, 5, _tag("ok", 1), 110, None, None),
        (0, 5, _tag("ok", 0), 105, None, None),  # two oks: the earliest time, the highest cluster
        (0, 5, _tag("receive", 1, 1, 1), 130, 7, 99),
        (0, 5, _tag("receive", 1, 1, 0), 120, 7, 98),  # redelivery order: the first receive's consumer
        (0, 5, _tag("receive", 1, 1, 1), 120, 7, 98),  # same time, later row: not the first
        (0, 5, _tag("ack", 1, 1), 125, None, 97),
        (0, 5, _tag("read", 0), 1111, 3, None),
        (0, 5, _tag("read", 0), 2222, 4, None),  # stored twice on c1
        (0, 5, _tag("read", 1), 3333, 9, None),
        (1, 0, _tag("read", ev.NO_CLUSTER), 1, 1, None),  # unknown cluster: no bit, no position
        (1, 0, _tag("nack"), 0, None, 55),
    ]
    # dense seqs: the slots pay (the rows above in the middle of them, in event order)
    filler = [(p, seq, _tag("invoke"), 1, None, None) for p in (0, 1) for seq in range(6, 2048)] if layout == "slots" else []
    m = aggregate.aggregate(_events(filler[:1000] + rows + filler[1000:], one_key), plan).to_pylist()
    assert len(m) == 2 + len(filler)
    key = (lambda r: r["mkey"]) if one_key else (lambda r: r["pidx"] << ev.SEQ_BITS | r["seq"])
    first, second = sorted((r for r in m if key(r) in (5, 1 << ev.SEQ_BITS)), key=key)
    if one_key:
        assert first["mkey"] == 5 and second["mkey"] == 1 << ev.SEQ_BITS
    else:
        assert (first["pidx"], first["seq"], second["pidx"], second["seq"]) == (0, 5, 1, 0)
    assert first["kinds"] == 1 << ev.OP_CODE["invoke"] | 1 << ev.OP_CODE["ok"]
    assert (first["invoke_ts"], first["ok_ts"], first["last_send_ts"], first["ok_cid"]) == (100, 105, 110, 1)
    assert (first["publish_ts"], first["read_bits"], first["recv_bits"], first["key_hash"]) == (99, 0b11, 0b10, 7)
    assert (first["idmin_0"], first["idmax_0"], first["position_0"], first["position_1"]) == (1111, 2222, 3, 9)
    assert (first["recv_first_1"], first["recv_last_1"], first["ack_first_1"], first["consumer_1"]) == (120, 130, 125, 0)
    assert first["recv_first_0"] is None and first["consumer_0"] is None
    assert second["kinds"] == 0 and second["read_bits"] == 0 and second["position_0"] is None
    assert second["publish_ts"] == 55


def test_message_part_keeps_a_block_of_seqs_together_and_spreads_blocks() -> None:
    """A reduce task gets whole blocks of consecutive seqs (its slots are then arithmetic, no sort),
    the same block from every map task, and the blocks spread evenly over the tasks."""
    block = 1 << ev.BLOCK_BITS
    rows = [(p, s, 0, 0, None, None) for p in range(4) for s in range(0, 100 * block, 64)]
    part = ev.message_part(_events(rows), 7).to_pylist()
    assert part[:800] == ev.message_part(_events(rows[:800]), 7).to_pylist()
    by_block: dict[tuple[int, int], set[int]] = {}
    for (p, s, *_), where in zip(rows, part, strict=True):
        by_block.setdefault((p, s // block), set()).add(where)
    assert all(len(parts) == 1 for parts in by_block.values())
    counts = [sum(parts == {i} for parts in by_block.values()) for i in range(7)]
    assert min(counts) > 0.7 * len(by_block) / 7


def test_a_value_hashed_alone_gets_the_hash_it_gets_among_others() -> None:
    """Only the rows that need a hash are hashed (a consumer's rows carry message ids only reads
    need): each gets the hash it would get in a whole column, the other rows keep their value."""
    values = pa.array(["a", None, "ccc", "dddddddddddd", "e"])
    otherwise = pa.array([1, 2, 3, 4, 5], pa.int64())
    full = ev.hash64(values).to_pylist()
    some = pa.array([True, True, False, True, False])
    assert ev._hashed_where(some, values, otherwise).to_pylist() == [full[0], full[1], 3, full[3], 5]
    assert ev._hashed_where(pa.repeat(True, 5), values, otherwise).to_pylist() == full
    assert ev._hashed_where(pa.repeat(False, 5), values, otherwise).to_pylist() == [1, 2, 3, 4, 5]


def _receive_part(path, with_statistics: bool = True):  # type: ignore[no-untyped-def]
    """A consumer's part in two row groups: every delivery of the first names its producer, the
    second holds one delivery without a producer."""
    rows = {
        "op": ["receive", "receive", "receive"], "producer": ["p0", "p1", None], "seq": [0, 0, None],
        "cluster": ["c1", "c1", "c1"], "subscription": ["s", "s", "s"], "consumer": ["k0", "k0", "k0"],
        "topic": ["persistent://t/n/a", "persistent://t/n/a", "persistent://t/n/a"],
        "message_id": ["(1,0,-1,-1)", "(1,1,-1,-1)", "(9,9,-1,-1)"], "ts": [5, 6, 7],
    }
    import pyarrow.parquet as pq

    pq.write_table(pa.table(rows), path, row_group_size=2, write_statistics=with_statistics)
    unit = reading.Unit(path.as_uri(), (0, 1), tuple(rows), "receive", named_only=("topic", "message_id"))
    return unit, pq.ParquetFile(path).metadata


@pytest.mark.parametrize("with_statistics", [True, False], ids=["statistics", "no-statistics"])
def test_message_ids_only_naming_deliveries_without_a_producer_are_read_where_one_may_be(tmp_path, with_statistics) -> None:
    """A row group whose producer statistics count no null is read without the columns that only
    name deliveries without a producer; one with such a delivery, or without statistics, whole.
    Either way the delivery without a producer is found and named by its message id."""
    unit, meta = _receive_part(tmp_path / "consumer-k0.parquet", with_statistics)
    whole = list(unit.columns)
    assert reading.columns_for(unit, meta, 1) == whole
    without_ids = [c for c in whole if c not in ("topic", "message_id")]
    assert reading.columns_for(unit, meta, 0) == (without_ids if with_statistics else whole)
    found = [anon for _, anon in reading.read_unit(unit, _ctx(anonymous=True)) if anon is not None]
    assert [t.to_pylist() for t in found] == [[{"cluster": "c1", "topic": "persistent://t/n/a", "message_id": "(9,9,-1,-1)"}]]


def test_statistics_that_hide_a_delivery_without_a_producer_make_the_part_unreadable(tmp_path, monkeypatch) -> None:
    """Rows that contradict their row group's statistics (no null producer counted, one found):
    the part is named unreadable, as a damaged page is, never judged without the message id."""
    unit, _ = _receive_part(tmp_path / "consumer-k0.parquet")
    monkeypatch.setattr(reading, "columns_for", lambda u, meta, rg: [c for c in u.columns if c not in u.named_only])
    with pytest.raises(OSError, match=r"cannot read history part .*consumer-k0.parquet \(row group 1: its statistics "
                                      r"count no null producer, its rows hold 1\)"):
        list(reading.read_unit(unit, _ctx(anonymous=True)))
