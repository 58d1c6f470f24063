"""The verifier on hand-made histories: a clean run, then one anomaly at a time."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pulsarlab.history import HistoryWriter, part_files, write_table
from pulsarlab.verify import CHECKS, VERDICT_FILE, Expectations, Verdict, verify

S = 1_000_000_000  # ns per second
MS = 1_000_000
T0 = 1_700_000_000 * S
TOPIC = "persistent://public/default/orders"
SUB = "audit"
Row = dict[str, Any]


def clean_history(n: int = 10) -> dict[str, list[Row]]:
    """Two producers alternate; message k is sent at k s, except a 7 s outage before k=5.

    Publish latency is 10 ms, delivery 5 ms after the ack, consumer ack 1 ms later. Keys cycle
    over two values so each producer's messages share keys in sequence order.
    """
    parts: dict[str, list[Row]] = {"producer-p0": [], "producer-p1": [], "consumer-c0": [], "read-c1": []}
    subscribed = {"op": "subscribe", "topic": TOPIC, "cluster": "c1", "subscription": SUB, "consumer": "c0", "ts": T0}
    parts["consumer-c0"].append(subscribed)
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
            {"op": "ack", "type": "ok", "ts": acked + 6 * MS, **delivery},
        ]
        parts["read-c1"].append({"op": "read", "ts": T0 + 100 * S + k, "read_index": 10 * k, "message_id": mid, **common})
    parts["read-c1"].append(scan_row(f"7:{n - 1}:-1:-1", n))
    return parts


def scan_row(end: str | None, read: int, topic: str = TOPIC, cluster: str = "c1", error: str | None = None) -> Row:
    """The reader's account of its scan of one partition: ``read`` messages, up to ``end`` (complete)."""
    last = end if read else None
    return {"op": "scan", "topic": topic, "cluster": cluster, "read_index": read, "message_id": last,
            "end_message_id": end, "error": error, "ts": T0 + 200 * S}


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


def test_delivery_its_producer_never_sent_is_unexpected(spark, tmp_path: Path) -> None:
    def ghost(parts: dict[str, list[Row]]) -> None:
        parts["consumer-c0"].append(
            {
                "op": "receive",
                "producer": "p0",
                "seq": 99,
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


@pytest.mark.parametrize("second", ["8:0:-1:-1", "7:99:-1:-1"])
def test_same_message_at_two_ids_is_duplicated_in_storage(spark, tmp_path: Path, second: str) -> None:
    def dup(parts: dict[str, list[Row]]) -> None:
        again = find(parts["read-c1"], producer="p0", seq=3)
        parts["read-c1"].append({**again, "message_id": second, "read_index": again["read_index"] + 5})

    verdict = run(tmp_path, dup)
    assert nonzero(verdict) == {"duplicated_in_storage": 1}
    # the example names both copies, and the note says whether they are in one ledger or two
    [example] = verdict.check("duplicated_in_storage").examples
    assert example["message_ids"] == sorted(["7:6:-1:-1", second])
    apart = second.startswith("8:")
    [note] = [n for n in verdict.notes if n.startswith("duplicated_in_storage:")]
    assert f"{int(apart)} have their copies in different ledgers" in note and f"{int(not apart)} two copies in one ledger" in note


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


def test_partitioned_topic_reads_match_sends_to_the_parent_topic(spark, tmp_path: Path) -> None:
    def partitioned(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"] = [r for r in parts["read-c1"] if r["op"] == "read"]
        for row in parts["read-c1"] + parts["consumer-c0"]:
            if row["op"] != "subscribe":
                row["topic"] = f"{TOPIC}-partition-{row['seq'] % 2}"
        reads = list(parts["read-c1"])
        for p in (0, 1):
            mine = [r for r in reads if r["seq"] % 2 == p]
            parts["read-c1"].append(scan_row(mine[-1]["message_id"], len(mine), f"{TOPIC}-partition-{p}"))

    verdict = run(tmp_path, partitioned)
    assert nonzero(verdict) == {} and verdict.status == "pass"


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
    with pytest.raises(ValueError, match=r"unknown check\(s\) in forbid: lots"):
        Expectations.from_mapping({"forbid": ["lots"]})
    with pytest.raises(ValueError, match="informational"):
        Expectations.from_mapping({"forbid": ["recovered"]})


def test_dimensions_come_from_the_parquet_files_without_spark(tmp_path: Path) -> None:
    from pulsarlab.verify.dims import read_dims

    parts = clean_history()
    parts["consumer-c0"].append({**find(parts["consumer-c0"], op="receive", producer="p0", seq=0), "producer": None})
    parts["read-c1"].pop()  # the scan row
    for row in parts["read-c1"]:
        row["topic"] = f"{TOPIC}-partition-{row['seq'] % 2}"
    d = read_dims(part_files(write_parts(tmp_path / "run", parts)))
    assert d.clusters == ["c1"] and d.producers == ["p0", "p1"] and d.consumers == ["c0"]
    assert d.subs == [("c1", SUB)] and d.sub_topics == {0: {TOPIC}}
    assert d.scanned == {("c1", TOPIC)} and d.read_topics == [f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"]
    assert d.scopes == {"p0": {("c1", TOPIC)}, "p1": {("c1", TOPIC)}}
    assert sorted(map(sorted, d.files)) == [["ack", "receive", "subscribe"], ["read"], ["send"]]
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


# -- evidence: never "pass" when part of it is missing ------------------------------------------
def manifest(directory: Path, run_id: str = "rA", finished: bool = True, failed: dict[str, str] | None = None) -> None:
    """A ``_run.json`` like ``workload run`` writes: a driver per part of ``directory`` (these
    record no counts, as older manifests), and ``failed`` maps the name of a failed one to its mode."""
    modes = {"producer": "produce", "consumer": "consume", "read": "read"}
    drivers = [{"name": p.stem, "mode": modes[p.stem.split("-")[0]], "part": p.stem, "exit_code": 0, "failed": False,
                "reason": None} for p in part_files(directory)]
    drivers += [{"name": n, "mode": mode, "part": n, "exit_code": -9, "failed": True, "reason": "killed by signal 9"}
                for n, mode in (failed or {}).items()]
    data = {"format": 1, "run": run_id, "topic": TOPIC, "partitions": 0, "finished": finished, "drivers": drivers}
    (directory / "_run.json").write_text(json.dumps(data))


def test_no_read_back_is_inconclusive_not_judged_on_deliveries(spark, tmp_path: Path) -> None:
    def no_reader(parts: dict[str, list[Row]]) -> None:
        del parts["read-c1"]

    verdict = run(tmp_path, no_reader)
    assert verdict.status == "inconclusive" and not verdict.ok and verdict.exit_code == 3
    assert verdict.counts()["lost"] == 0, "deliveries must not stand in for storage"
    assert any("no read-back" in r and TOPIC in r for r in verdict.reasons)


def test_scan_that_stopped_early_or_short_of_the_end_is_inconclusive(spark, tmp_path: Path) -> None:
    def stalled(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"] = [r for r in parts["read-c1"] if r["op"] == "read" and r["seq"] < 3]
        parts["read-c1"].append(scan_row("7:9:-1:-1", 5, error="stalled after 5 messages"))

    def short(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"][-1] = {**scan_row("7:9:-1:-1", 9), "message_id": "7:8:-1:-1"}

    first = run(tmp_path / "a", stalled)
    assert first.status == "inconclusive" and first.counts()["lost"] > 0
    assert any("stalled after 5 messages" in r for r in first.reasons)
    second = run(tmp_path / "b", short)
    assert second.status == "inconclusive" and any("but the end is 7:9:-1:-1" in r for r in second.reasons)


def test_a_read_back_file_holding_fewer_reads_than_its_scan_says_is_inconclusive(spark, tmp_path: Path) -> None:
    def cut_short(parts: dict[str, list[Row]]) -> None:  # the file lost its last reads (a full disk, a killed copy)
        scan = parts["read-c1"].pop()
        parts["read-c1"] = parts["read-c1"][:4] + [scan]

    verdict = run(tmp_path, cut_short)
    assert verdict.status == "inconclusive" and verdict.exit_code == 3, verdict.reasons
    assert any(r.endswith(f"its scan of {TOPIC} on cluster c1 says 10 message(s) were read, but the file holds 4 read "
                          "row(s) for it") and "read-c1" in r for r in verdict.reasons), verdict.reasons


def test_a_truncated_part_file_is_named_and_the_verdict_inconclusive(spark, tmp_path: Path) -> None:
    history = write_parts(tmp_path / "run", clean_history())
    [consumer] = [p for p in part_files(history) if p.name.startswith("consumer-c0")]
    consumer.write_bytes(consumer.read_bytes()[: consumer.stat().st_size // 2])  # a copy killed half-way
    verdict = verify(history)
    assert verdict.status == "inconclusive" and verdict.exit_code == 3, verdict.reasons
    assert any(r.startswith(f"history part {consumer} cannot be read") for r in verdict.reasons), verdict.reasons


def test_empty_partition_scan_is_complete(spark, tmp_path: Path) -> None:
    def extra_partition(parts: dict[str, list[Row]]) -> None:
        parts["read-c1"].append(scan_row("(12,-1,-1,-1)", 0, topic=f"{TOPIC}-partition-9"))

    assert run(tmp_path, extra_partition).status == "pass"


def test_failed_driver_is_inconclusive_unless_a_presence_check_proves_failure(spark, tmp_path: Path) -> None:
    run(tmp_path / "a")
    manifest(tmp_path / "a" / "run", failed={"c0": "consume"})
    consumer_died = verify(tmp_path / "a" / "run")
    assert consumer_died.status == "inconclusive"
    assert any("driver c0 (consume) failed: killed by signal 9" in r for r in consumer_died.reasons)

    def dup(parts: dict[str, list[Row]]) -> None:
        again = find(parts["read-c1"], producer="p0", seq=3)
        parts["read-c1"].insert(0, {**again, "message_id": "8:0:-1:-1", "read_index": 15})
        parts["read-c1"][-1]["read_index"] += 1  # the scan read it too: the evidence agrees with itself

    run(tmp_path / "b", dup)
    manifest(tmp_path / "b" / "run", failed={"c0": "consume"})
    assert verify(tmp_path / "b" / "run").status == "fail", "a duplicate seen is a duplicate, whoever died"
    manifest(tmp_path / "b" / "run", failed={"p0": "produce"})
    assert verify(tmp_path / "b" / "run").status == "inconclusive", "a dead producer's journal may miss invokes"
    manifest(tmp_path / "b" / "run", finished=False)
    assert any("never finished" in r for r in verify(tmp_path / "b" / "run").reasons)


def test_payload_changed_in_storage_or_delivery_is_corrupted(spark, tmp_path: Path) -> None:
    def corrupt(parts: dict[str, list[Row]]) -> None:
        for part in parts.values():
            for r in part:
                if r["op"] in ("send", "receive", "read"):
                    r["payload_hash"] = f"{r['seq']:08x}"
        find(parts["read-c1"], producer="p1", seq=3)["payload_hash"] = "deadbeef"
        find(parts["consumer-c0"], op="receive", producer="p0", seq=2)["payload_hash"] = "0badf00d"

    verdict = run(tmp_path, corrupt)
    assert nonzero(verdict) == {"corrupted": 2} and verdict.status == "fail"
    assert verdict.check("corrupted").examples[0]["delivered_on"] == ["c1"]


def test_subscription_that_received_nothing_never_delivered_anything(spark, tmp_path: Path) -> None:
    def idle(parts: dict[str, list[Row]]) -> None:
        subscribed = {"op": "subscribe", "topic": TOPIC, "cluster": "c1", "subscription": "idle", "consumer": "c9", "ts": T0}
        parts["consumer-c9"] = [subscribed]

    verdict = run(tmp_path, idle)
    assert nonzero(verdict) == {"never_delivered": 10}
    assert {e["subscription"] for e in verdict.check("never_delivered").examples} == {"idle"}


def test_failed_ack_does_not_count_as_acknowledged(spark, tmp_path: Path) -> None:
    def failed_ack(parts: dict[str, list[Row]]) -> None:
        rows = parts["consumer-c0"]
        ack = find(rows, op="ack", producer="p0", seq=1)
        ack.update(type="fail", error="TimeoutException")
        rows.append({**find(rows, op="receive", producer="p0", seq=1), "ts": ack["ts"] + S, "redelivery_count": 1})
        rows.append({**ack, "type": "ok", "error": None, "ts": ack["ts"] + 2 * S})

    assert nonzero(run(tmp_path, failed_ack)) == {}


def test_invoke_never_answered_is_info_not_fail(spark, tmp_path: Path) -> None:
    def killed(parts: dict[str, list[Row]]) -> None:
        parts["producer-p1"].append({"op": "send", "type": "invoke", "producer": "p1", "seq": 5, "topic": TOPIC,
                                     "cluster": "c1", "ts": T0 + 20 * S})

    m = run(tmp_path, killed).metrics["messages"]
    assert (m["sent"], m["info"], m["indeterminate"], m["failed"]) == (11, 1, 1, 0)


def test_empty_history_is_inconclusive(spark, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    verdict = verify(tmp_path / "empty")
    assert verdict.status == "inconclusive" and any("empty history" in r for r in verdict.reasons)


def test_two_runs_on_one_topic_verified_apart_and_together(spark, tmp_path: Path) -> None:
    """Each run's reader sees both runs' messages; neither run's verdict is disturbed by the other's."""
    runs = {}
    for run_id, offset in (("rA", 0), ("rB", 1000)):
        parts = clean_history()
        for part in parts.values():
            for r in part:
                if r.get("producer"):
                    r["producer"] = f"{run_id}-{r['producer']}"
                if r.get("message_id") and r["op"] != "scan":
                    r["message_id"] = f"7:{offset + int(r['message_id'].split(':')[1])}:-1:-1"
                r["run"] = run_id
        runs[run_id] = parts
    both_reads = [r for p in runs.values() for r in p["read-c1"] if r["op"] == "read"]
    for run_id, parts in runs.items():
        parts["read-c1"] = [*both_reads, scan_row("7:1009:-1:-1", 20)]
        write_parts(tmp_path / run_id, parts)
        manifest(tmp_path / run_id, run_id)
    for run_id in runs:
        alone = verify(tmp_path / run_id)
        assert alone.status == "pass", alone.to_json()
        assert alone.metrics["messages"]["acknowledged"] == 10
        assert any("2 producer(s) sent nothing" in n for n in alone.notes)
    together = verify([tmp_path / "rA", tmp_path / "rB"], out=tmp_path / "both.json")
    assert together.status == "pass" and together.metrics["messages"]["acknowledged"] == 20
    assert json.loads((tmp_path / "both.json").read_text())["directories"] == [str(tmp_path / "rA"), str(tmp_path / "rB")]


def test_verify_command_exit_codes(spark, tmp_path: Path) -> None:
    """0 pass, 1 a forbidden check failed, 3 inconclusive with the reason on stderr, 2 usage error."""
    from typer.testing import CliRunner

    from pulsarlab.cli import app

    runner = CliRunner()
    clean = write_parts(tmp_path / "clean", clean_history())
    parts = clean_history()
    parts["read-c1"].remove(find(parts["read-c1"], producer="p1", seq=2))
    parts["read-c1"][-1]["read_index"] = 9  # the scan read one message fewer: a loss, not a file cut short
    lossy = write_parts(tmp_path / "lossy", parts)
    parts = clean_history()
    del parts["read-c1"]
    unread = write_parts(tmp_path / "unread", parts)

    assert runner.invoke(app, ["verify", str(clean)]).exit_code == 0
    assert runner.invoke(app, ["verify", str(lossy), "--json"]).exit_code == 1
    result = runner.invoke(app, ["verify", str(unread), "--json"])
    assert result.exit_code == 3
    assert json.loads(result.stdout)["status"] == "inconclusive"
    assert "inconclusive: no read-back" in result.stderr
    missing = runner.invoke(app, ["verify", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no history folder" in missing.stderr


# -- geo-replication: every acknowledged message on every cluster its topic replicates to --------
def geo(dropped: tuple[int, ...] = (), scan_error: str | None = None, consume_on: str = "c2",
        replica_read: bool = True) -> Callable[[dict[str, list[Row]]], None]:
    """Produced on c1, replicated to c2 (under c2's own ids), consumed on ``consume_on``; the replica
    misses the messages at ``dropped`` positions; its scan ends with ``scan_error``."""

    def mutate(parts: dict[str, list[Row]]) -> None:
        for row in parts["consumer-c0"]:
            row["cluster"] = consume_on
        reads = [r for r in parts["read-c1"] if r["op"] == "read"]
        kept = [{**r, "cluster": "c2", "message_id": "8" + r["message_id"][1:]} for i, r in enumerate(reads) if i not in dropped]
        if replica_read:
            parts["read-c2"] = [*kept, scan_row("8:9:-1:-1", len(kept), cluster="c2", error=scan_error)]
            if dropped and dropped[-1] == len(reads) - 1 and not scan_error:
                parts["read-c2"][-1]["message_id"] = "8:9:-1:-1"  # the end was reached: a clean scan
    return mutate


def geo_run(tmp_path: Path, mutate: Callable[[dict[str, list[Row]]], None]) -> Verdict:
    parts = clean_history()
    mutate(parts)
    directory = write_parts(tmp_path / "run", parts)
    (directory / "_run.json").write_text(json.dumps({
        "format": 1, "run": "rG", "topic": TOPIC, "partitions": 0, "cluster": "c1", "read_clusters": ["c1", "c2"],
        "consume_cluster": "c2", "finished": True, "drivers": [], "replication": {TOPIC: ["c1", "c2"]}}))
    return verify(directory)


def test_clean_two_cluster_replicated_history_passes(spark, tmp_path: Path) -> None:
    verdict = geo_run(tmp_path, geo())
    assert verdict.status == "pass", (verdict.reasons, nonzero(verdict))
    assert verdict.counts()["not_replicated"] == 0 and verdict.metrics["messages"]["delivered"] == 10


def test_replica_missing_messages_is_caught_exactly_per_destination(spark, tmp_path: Path) -> None:
    verdict = geo_run(tmp_path, geo(dropped=(2, 3, 7)))
    assert verdict.status == "fail" and not verdict.reasons
    # the consumers are on c2: what never reached c2 was never stored there, so nothing else counts
    assert nonzero(verdict) == {"not_replicated": 3}
    examples = verdict.check("not_replicated").examples
    assert [(e["producer"], e["seq"]) for e in examples] == [("p0", 1), ("p1", 1), ("p1", 3)]
    assert {(e["cluster"], e["acknowledged_on"]) for e in examples} == {("c2", "c1")}


def test_replica_scan_incomplete_is_inconclusive(spark, tmp_path: Path) -> None:
    verdict = geo_run(tmp_path, geo(dropped=(8, 9), scan_error="stalled after 8 messages"))
    assert verdict.status == "inconclusive" and verdict.exit_code == 3
    assert verdict.counts()["not_replicated"] == 2  # a guess: what the scan did not reach
    assert any("on cluster c2" in r and "stalled after 8 messages" in r for r in verdict.reasons)


def test_replication_target_never_read_back_is_inconclusive(spark, tmp_path: Path) -> None:
    verdict = geo_run(tmp_path, geo(consume_on="c1", replica_read=False))
    assert verdict.status == "inconclusive"
    assert any("on cluster c2 (a replication target)" in r for r in verdict.reasons)
