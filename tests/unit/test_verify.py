"""The verifier on hand-made histories: a clean run, then one anomaly at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pulsarlab.history import HistoryWriter, write_table
from pulsarlab.verify import CHECKS, VERDICT_FILE, Expectations, Verdict, spark_session, verify

S = 1_000_000_000  # ns per second
MS = 1_000_000
T0 = 1_700_000_000 * S
TOPIC = "persistent://public/default/orders"
SUB = "audit"
Row = dict[str, Any]


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    session = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g")
    yield session
    session.stop()


def clean_history(n: int = 10) -> dict[str, list[Row]]:
    """Two producers alternate; message k is sent at k s, except a 7 s outage before k=5.

    Publish latency is 10 ms, delivery 5 ms after the ack, consumer ack 1 ms later. Keys cycle
    over two values so each producer's messages share keys in sequence order.
    """
    parts: dict[str, list[Row]] = {"producer-p0": [], "producer-p1": [], "consumer-c0": [], "read-c1": []}
    for k in range(n):
        producer, seq = f"p{k % 2}", k // 2
        key, mid = f"k{seq % 2}", f"7:{k}:-1:-1"
        sent = T0 + k * S + (7 * S if k >= 5 else 0)
        acked = sent + 10 * MS
        common = {"producer": producer, "seq": seq, "key": key, "topic": TOPIC, "cluster": "c1", "region": "r1"}
        parts[f"producer-{producer}"] += [
            {"op": "send", "type": "invoke", "ts": sent, **common},
            {"op": "send", "type": "ok", "ts": acked, "message_id": mid, **common},
        ]
        delivery = {"message_id": mid, "subscription": SUB, "consumer": "c0", "publish_ts": sent, **common}
        parts["consumer-c0"] += [
            {"op": "receive", "ts": acked + 5 * MS, "redelivery_count": 0, **delivery},
            {"op": "ack", "ts": acked + 6 * MS, **delivery},
        ]
        parts["read-c1"].append({"op": "read", "ts": T0 + 100 * S + k, "read_index": 10 * k, "message_id": mid, **common})
    return parts


def write_parts(directory: Path, parts: dict[str, list[Row]]) -> Path:
    """One part file per process; the producers go through HistoryWriter like a real run."""
    for name, rows in parts.items():
        if name.startswith("producer-"):
            with HistoryWriter(directory, name, flush_rows=3) as w:
                for row in rows:
                    w.append(**row)
        else:
            write_table(directory, name, rows)
    return directory


def find(rows: list[Row], **match: Any) -> Row:
    hits = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(hits) == 1, (match, hits)
    return hits[0]


def nonzero(verdict: Verdict) -> dict[str, int]:
    return {name: count for name, count in verdict.counts().items() if count}


def run(tmp_path: Path, mutate: Callable[[dict[str, list[Row]]], None] | None = None, **kw: Any) -> Verdict:
    parts = clean_history()
    if mutate:
        mutate(parts)
    return verify(write_parts(tmp_path / "run", parts), **kw)


def test_clean_run_passes_with_every_check_zero(spark, tmp_path: Path) -> None:
    verdict = run(tmp_path)
    assert verdict.ok
    assert nonzero(verdict) == {}
    assert [c.name for c in verdict.checks] == list(CHECKS)
    messages = verdict.metrics["messages"]
    assert messages == {
        "sent": 10,
        "acknowledged": 10,
        "failed": 0,
        "info": 0,
        "indeterminate": 0,
        "stored": 10,
        "delivered": 10,
    }
    assert verdict.notes == []


def test_metrics_from_hand_made_timestamps(spark, tmp_path: Path) -> None:
    m = run(tmp_path).metrics
    gap = m["longest_gap_without_ack_s"]
    # last ok before the outage: k=4 at 4.01 s; first after: k=5 at 12.01 s
    assert gap["seconds"] == pytest.approx(8.0)
    assert gap["from_ts"] == T0 + 4 * S + 10 * MS
    assert gap["to_ts"] == T0 + 12 * S + 10 * MS
    assert m["publish_latency_ms"]["p50"] == pytest.approx(10.0)
    assert m["publish_latency_ms"]["max"] == pytest.approx(10.0)
    assert m["end_to_end_latency_ms"]["p99"] == pytest.approx(15.0)
    # 10 acks between 0.01 s and 16.01 s
    assert m["throughput_msgs_per_s"] == pytest.approx(10 / 16.0)


def test_gap_at_the_end_of_the_run_counts(spark, tmp_path: Path) -> None:
    def outage_at_end(parts: dict[str, list[Row]]) -> None:
        last = T0 + 30 * S
        parts["producer-p0"] += [
            {"op": "send", "type": "invoke", "producer": "p0", "seq": 5, "ts": last - S, "topic": TOPIC},
            {"op": "send", "type": "info", "producer": "p0", "seq": 5, "ts": last, "topic": TOPIC},
        ]

    verdict = run(tmp_path, outage_at_end)
    # last ok is k=9 at 16.01 s, the run's last send event (a timeout) at 30 s
    assert verdict.metrics["longest_gap_without_ack_s"]["seconds"] == pytest.approx(13.99)
    assert verdict.metrics["messages"]["indeterminate"] == 1
    assert nonzero(verdict) == {}


def test_dropped_stored_row_is_lost(spark, tmp_path: Path) -> None:
    def drop(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"].remove(find(parts["read-c1"], producer="p1", seq=2))

    verdict = run(tmp_path, drop)
    assert nonzero(verdict) == {"lost": 1}
    assert not verdict.ok
    example = verdict.check("lost").examples[0]
    assert (example["producer"], example["seq"], example["cluster"]) == ("p1", 2, "c1")


def test_delivery_after_ack_is_a_duplicate_but_redelivery_before_ack_is_not(spark, tmp_path: Path) -> None:
    def redeliver(parts: dict[str, list[Row]]) -> None:
        rows = parts["consumer-c0"]
        ack = find(rows, op="ack", producer="p0", seq=1)
        rows.append({**find(rows, op="receive", producer="p0", seq=1), "ts": ack["ts"] + S, "redelivery_count": 1})
        before = find(rows, op="receive", producer="p1", seq=3)
        rows.append({**before, "ts": before["ts"] + 1, "redelivery_count": 1})  # still before its ack

    verdict = run(tmp_path, redeliver)
    assert nonzero(verdict) == {"duplicated_delivery": 1}
    example = verdict.check("duplicated_delivery").examples[0]
    assert (example["producer"], example["seq"], example["subscription"]) == ("p0", 1, SUB)


def test_swapped_storage_order_is_one_producer_order_violation(spark, tmp_path: Path) -> None:
    def swap(parts: dict[str, list[Row]]) -> None:
        a = find(parts["read-c1"], producer="p0", seq=1)
        b = find(parts["read-c1"], producer="p0", seq=2)
        a["read_index"], b["read_index"] = b["read_index"], a["read_index"]

    verdict = run(tmp_path, swap)
    assert nonzero(verdict) == {"order_violations_producer": 1}
    example = verdict.check("order_violations_producer").examples[0]
    assert (example["producer"], example["seq"], example["prev_seq"]) == ("p0", 1, 2)


def test_backwards_first_delivery_within_a_key_is_a_key_order_violation(spark, tmp_path: Path) -> None:
    def swap_deliveries(parts: dict[str, list[Row]]) -> None:
        rows = parts["consumer-c0"]
        # p0 seq 0 and 2 share key k0; deliver seq 2 before seq 0 (acks follow each receive)
        r0, r2 = find(rows, op="receive", producer="p0", seq=0), find(rows, op="receive", producer="p0", seq=2)
        a0, a2 = find(rows, op="ack", producer="p0", seq=0), find(rows, op="ack", producer="p0", seq=2)
        (r0["ts"], r2["ts"]), (a0["ts"], a2["ts"]) = (r2["ts"], r0["ts"]), (a2["ts"], a0["ts"])

    verdict = run(tmp_path, swap_deliveries)
    assert nonzero(verdict) == {"order_violations_key": 1}
    assert verdict.ok, "key order is allowed by default"
    strict = run(tmp_path / "strict", swap_deliveries, expect=Expectations.from_mapping({"forbid": ["order_violations_key"]}))
    assert not strict.ok


def test_delivery_nobody_sent_is_unexpected(spark, tmp_path: Path) -> None:
    def ghost(parts: dict[str, list[Row]]) -> None:
        parts["consumer-c0"].append(
            {
                "op": "receive",
                "producer": "ghost",
                "seq": 0,
                "key": "k9",
                "message_id": "9:9:-1:-1",
                "topic": TOPIC,
                "cluster": "c1",
                "subscription": SUB,
                "consumer": "c0",
                "ts": T0 + 50 * S,
            }
        )

    verdict = run(tmp_path, ghost)
    assert nonzero(verdict) == {"unexpected": 1}
    assert verdict.check("unexpected").examples[0]["delivered_on"] == ["c1"]


def test_stored_message_without_producer_properties_is_unexpected(spark, tmp_path: Path) -> None:
    def foreign(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"].append(
            {"op": "read", "message_id": "9:1:-1:-1", "topic": TOPIC, "cluster": "c1", "read_index": 99, "ts": T0 + 101 * S}
        )

    verdict = run(tmp_path, foreign)
    assert nonzero(verdict) == {"unexpected": 1}


def test_info_send_that_landed_is_recovered_not_lost(spark, tmp_path: Path) -> None:
    def timeout(parts: dict[str, list[Row]]) -> None:
        ok = find(parts["producer-p1"], type="ok", seq=0)
        ok.update(type="info", message_id=None, error="timeout")

    verdict = run(tmp_path, timeout)
    assert nonzero(verdict) == {"recovered": 1}
    assert verdict.ok
    assert verdict.metrics["messages"]["indeterminate"] == 0


def test_definitely_failed_send_that_landed_is_flagged(spark, tmp_path: Path) -> None:
    def failed(parts: dict[str, list[Row]]) -> None:
        find(parts["producer-p1"], type="ok", seq=0).update(type="fail", message_id=None)

    assert nonzero(run(tmp_path, failed)) == {"failed_but_stored": 1}


def test_same_message_at_two_ids_is_duplicated_in_storage(spark, tmp_path: Path) -> None:
    def dup(parts: dict[str, list[Row]]) -> None:
        again = find(parts["read-c1"], producer="p0", seq=3)
        parts["read-c1"].append({**again, "message_id": "8:0:-1:-1", "read_index": again["read_index"] + 5})

    verdict = run(tmp_path, dup)
    assert nonzero(verdict) == {"duplicated_in_storage": 1}


def test_reading_the_same_id_twice_is_not_a_duplicate(spark, tmp_path: Path) -> None:
    def reread(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"].append({**find(parts["read-c1"], producer="p0", seq=4), "read_index": 100})

    assert nonzero(run(tmp_path, reread)) == {}


def test_stored_but_never_received_is_never_delivered(spark, tmp_path: Path) -> None:
    def skip(parts: dict[str, list[Row]]) -> None:
        rows = parts["consumer-c0"]
        for op in ("receive", "ack"):
            rows.remove(find(rows, op=op, producer="p1", seq=4))

    verdict = run(tmp_path, skip)
    assert nonzero(verdict) == {"never_delivered": 1}
    assert verdict.check("never_delivered").examples[0]["subscription"] == SUB


def test_without_read_rows_deliveries_are_the_storage_view(spark, tmp_path: Path) -> None:
    def no_reader(parts: dict[str, list[Row]]) -> None:
        del parts["read-c1"]
        rows = parts["consumer-c0"]
        for op in ("receive", "ack"):
            rows.remove(find(rows, op=op, producer="p0", seq=0))

    verdict = run(tmp_path, no_reader)
    assert nonzero(verdict) == {"lost": 1}
    assert any("no read rows" in n for n in verdict.notes)


def test_partitioned_topic_reads_match_sends_to_the_parent_topic(spark, tmp_path: Path) -> None:
    def partitioned(parts: dict[str, list[Row]]) -> None:
        for row in parts["read-c1"] + parts["consumer-c0"]:
            row["topic"] = f"{TOPIC}-partition-{row['seq'] % 2}"

    assert nonzero(run(tmp_path, partitioned)) == {}


def test_geo_replica_is_judged_per_cluster(spark, tmp_path: Path) -> None:
    """A second cluster stores every message again under its own ids: not a duplicate."""

    def replicate(parts: dict[str, list[Row]]) -> None:
        parts["read-c2"] = [{**r, "cluster": "c2", "message_id": "r" + r["message_id"]} for r in parts["read-c1"]]
        parts["read-c2"].pop()  # one message missing on the replica: not 'lost' (acknowledged on c1)

    assert nonzero(run(tmp_path, replicate)) == {}


def test_verdict_json_is_written_and_table_renders(spark, tmp_path: Path) -> None:
    verdict = run(tmp_path)
    written = json.loads((tmp_path / "run" / VERDICT_FILE).read_text())
    assert written == json.loads(json.dumps(verdict.to_json()))
    assert written["ok"] is True
    assert {c["name"] for c in written["checks"]} == set(CHECKS)
    assert verdict.render_table().row_count == len(CHECKS) + len(list(_leaves(verdict.metrics)))


def _leaves(d: dict[str, Any]) -> Iterator[Any]:
    for v in d.values():
        yield from _leaves(v) if isinstance(v, dict) else [v]


def test_expectations_overrides() -> None:
    e = Expectations.from_mapping({"allow": ["duplicated_delivery"], "forbid": ["order_violations_key"]})
    assert e.allows("duplicated_delivery") and not e.allows("order_violations_key") and not e.allows("lost")
    with pytest.raises(ValueError, match="unknown checks"):
        Expectations.from_mapping({"forbid": ["lots"]})
    with pytest.raises(ValueError, match="informational"):
        Expectations.from_mapping({"forbid": ["recovered"]})


def test_dimensions_come_from_the_parquet_files_without_spark(tmp_path: Path) -> None:
    from pulsarlab.history import part_files
    from pulsarlab.verify.dims import read_dims

    parts = clean_history()
    parts["consumer-c0"].append({**find(parts["consumer-c0"], op="receive", producer="p0", seq=0), "producer": None})
    for row in parts["read-c1"]:
        row["topic"] = f"{TOPIC}-partition-{row['seq'] % 2}"
    d = read_dims(part_files(write_parts(tmp_path / "run", parts)))
    assert d.clusters == ["c1"] and d.producers == ["p0", "p1"] and d.consumers == ["c0"]
    assert d.subs == [("c1", SUB)] and d.sub_topics == {0: {TOPIC}}
    assert d.scanned == {("c1", TOPIC)} and d.read_topics == [f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"]
    assert d.scopes == {"p0": {("c1", TOPIC)}, "p1": {("c1", TOPIC)}}
    assert sorted(map(sorted, d.files)) == [["ack", "receive"], ["read"], ["send"]]
    assert d.anonymous and d.seq_range == (0, 4)


def test_route_values_land_in_the_partition_they_stand_for(spark) -> None:
    from pyspark.sql import functions as F

    from pulsarlab.verify.exchange import routes, spark_partition

    for n in (1, 3, 4, 8):
        values = routes(n)
        df = spark.createDataFrame([(v,) for v in values], "route long").repartition(n, "route")
        got = dict(df.select("route", F.spark_partition_id().alias("p")).collect())
        assert got == {v: p for p, v in enumerate(values)}
    extremes = [-(1 << 63), -1, 1 << 40, (1 << 63) - 1]
    df = spark.createDataFrame([(v,) for v in extremes], "route long").repartition(5, "route")
    assert dict(df.select("route", F.spark_partition_id()).collect()) == {v: spark_partition(v, 5) for v in extremes}
