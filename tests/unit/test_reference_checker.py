"""The benchmark's reference checker on tiny hand-made histories: one rule of docs/history.md per test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.reference_checker import check
from pulsarlab.history import write_table

RUN = "r20260101-000000-abcd"
P = f"{RUN}-p0"
T = "persistent://lab/ns/orders"
ZERO = dict.fromkeys(
    ["lost", "not_replicated", "never_delivered", "corrupted", "duplicated_in_storage", "duplicated_delivery", "unexpected",
     "failed_but_stored", "order_violations_producer", "order_violations_key", "recovered"], 0)


def mid(entry: int, ledger: int = 7) -> str:
    return f"({ledger},{entry},-1,-1)"


def send(seq: int, kind: str, ts: int, **kw: Any) -> dict[str, Any]:
    row = {"op": "send", "type": kind, "producer": P, "seq": seq, "key": "k", "topic": T, "cluster": "a", "ts": ts,
           "payload_hash": f"{seq:08x}", "run": RUN}
    if kind == "ok":
        row["message_id"] = mid(seq)
    return {**row, **kw}


def receive(seq: int, ts: int, **kw: Any) -> dict[str, Any]:
    return {"op": "receive", "producer": P, "seq": seq, "key": "k", "topic": T, "cluster": "a", "consumer": "c0",
            "subscription": "sub", "message_id": mid(seq), "payload_hash": f"{seq:08x}", "ts": ts, **kw}


def ack(seq: int, ts: int, **kw: Any) -> dict[str, Any]:
    return {"op": "ack", "type": "ok", "producer": P, "seq": seq, "key": "k", "topic": T, "cluster": "a", "consumer": "c0",
            "subscription": "sub", "message_id": mid(seq), "ts": ts, **kw}


def read(seq: int, index: int, **kw: Any) -> dict[str, Any]:
    return {"op": "read", "producer": P, "seq": seq, "key": "k", "topic": T, "cluster": "a", "message_id": mid(seq),
            "payload_hash": f"{seq:08x}", "read_index": index, "ts": 10_000 + index, **kw}


def scan(count: int, last: str | None, end: str | None, error: str | None = None, topic: str = T, cluster: str = "a") -> dict:
    return {"op": "scan", "topic": topic, "cluster": cluster, "read_index": count, "message_id": last, "end_message_id": end,
            "error": error, "ts": 20_000}


def healthy(n: int = 3) -> list[dict[str, Any]]:
    """n messages sent, acknowledged, received, acknowledged by the consumer, and read back completely."""
    out = [{"op": "subscribe", "topic": T, "cluster": "a", "consumer": "c0", "subscription": "sub", "ts": 1}]
    for s in range(n):
        out += [send(s, "invoke", 100 + 10 * s), send(s, "ok", 105 + 10 * s), receive(s, 1000 + 10 * s),
                ack(s, 1005 + 10 * s), read(s, s)]
    return [*out, scan(n, mid(n - 1), mid(n - 1))]


def judge(tmp_path: Path, rows: list[dict[str, Any]], manifest: dict | None = None) -> dict[str, Any]:
    write_table(tmp_path, "part", rows)
    if manifest is not None:
        (tmp_path / "_run.json").write_text(json.dumps(manifest))
    return check(tmp_path)


def without(rows: list[dict[str, Any]], op: str, seq: int) -> list[dict[str, Any]]:
    return [r for r in rows if not (r["op"] == op and r.get("seq") == seq)]


def only(result: dict[str, Any], **counts: int) -> None:
    assert result["counts"] == {**ZERO, **counts}


def test_a_healthy_history_passes_with_its_message_counts(tmp_path):
    r = judge(tmp_path, healthy())
    assert (r["status"], r["reasons"]) == ("pass", [])
    only(r)
    assert r["messages"] == {"sent": 3, "acknowledged": 3, "failed": 0, "info": 0, "indeterminate": 0, "stored": 3,
                             "delivered": 3}


def test_lost_an_acknowledged_message_missing_from_the_read_rows_of_its_cluster(tmp_path):
    rows = [*without(healthy(), "read", 1), read(1, 9, cluster="b")]  # stored, but on another cluster
    r = judge(tmp_path, rows)
    only(r, lost=1)
    assert r["status"] == "fail"


def test_never_delivered_counts_per_subscription_including_one_known_only_from_subscribe(tmp_path):
    rows = [*without(without(healthy(), "receive", 1), "ack", 1),
            {"op": "subscribe", "topic": T, "cluster": "a", "consumer": "c9", "subscription": "idle", "ts": 2},
            {"op": "subscribe", "topic": T, "cluster": "b", "consumer": "c8", "subscription": "elsewhere", "ts": 2}]
    r = judge(tmp_path, rows)
    only(r, never_delivered=1 + 3)  # "elsewhere" is on cluster b, where nothing is stored
    assert r["status"] == "fail"


def test_corrupted_once_per_message_against_the_invoke_hash(tmp_path):
    rows = [r for r in healthy() if not (r["op"] in ("receive", "read") and r["seq"] == 2)]
    rows += [receive(2, 1020, payload_hash="deadbeef"), read(2, 2, payload_hash="deadbeef")]
    only(judge(tmp_path, rows), corrupted=1)


def test_duplicated_in_storage_needs_two_different_ids_on_one_cluster(tmp_path):
    rows = [*healthy(), read(0, 3, message_id=mid(3)), read(1, 4, message_id=mid(1)), read(2, 5, message_id=mid(2))]
    rows = [r for r in rows if r["op"] != "scan"] + [scan(6, mid(3), mid(3))]
    r = judge(tmp_path, rows)
    # seq 0 again at entry 3: one duplicate (and, read after seq 2, one backwards step of its producer); seq 1 and 2
    # read again at their own ids are not duplicates
    only(r, duplicated_in_storage=1, order_violations_producer=1)


def test_duplicated_delivery_only_after_an_ok_ack_and_a_null_ack_type_is_ok(tmp_path):
    rows = [r for r in healthy() if r["op"] != "ack"]
    rows += [ack(0, 1005), receive(0, 1100),  # after an ok ack: duplicate
             ack(1, 1015, type=None), receive(1, 1101),  # null type counts as ok: duplicate
             ack(2, 1025, type="fail", error="timeout"), receive(2, 1102), ack(2, 1110)]  # after a failed ack: not
    rows += [receive(0, 1001)]  # redelivered before the first ack: at-least-once, fine
    only(judge(tmp_path, rows), duplicated_delivery=2)


def test_unexpected_never_invoked_or_without_a_header(tmp_path):
    rows = healthy() + [read(7, 3, message_id=mid(7)), receive(7, 1200, message_id=mid(7)),
                        {"op": "receive", "topic": T, "cluster": "a", "consumer": "c0", "subscription": "sub",
                         "message_id": mid(50), "ts": 1300}]
    rows = [r for r in rows if r["op"] != "scan"] + [scan(4, mid(7), mid(7))]
    only(judge(tmp_path, rows), unexpected=2)


def test_failed_but_stored_and_not_lost(tmp_path):
    rows = [r for r in healthy() if not (r["op"] == "send" and r["type"] == "ok" and r["seq"] == 1)]
    r = judge(tmp_path, [*rows, send(1, "fail", 106, error="ProducerQueueIsFull")])
    only(r, failed_but_stored=1)
    assert r["messages"]["failed"] == 1 and r["status"] == "fail"


def test_order_violations_producer_compares_with_the_previous_message_by_read_index(tmp_path):
    rows = [r for r in healthy(5) if r["op"] != "read"] + [read(s, i) for i, s in enumerate([0, 3, 1, 2, 4])]
    only(judge(tmp_path, rows), order_violations_producer=1)


def test_order_violations_key_uses_first_deliveries_and_does_not_fail_the_run(tmp_path):
    rows = [r for r in healthy(4) if r["op"] != "receive"]
    rows += [receive(0, 1000), receive(2, 1001), receive(1, 1002), receive(3, 1003),
             receive(0, 1004, consumer="c1"),  # a later redelivery to another consumer: not a first delivery
             receive(9, 1005, key="other")]
    rows = [r for r in rows if r["op"] != "ack"] + [ack(s, 1010 + s) for s in range(4)]
    r = judge(tmp_path, [*rows, send(9, "invoke", 500, key="other")])  # seq 9 is unstored: never_delivered stays 0
    only(r, order_violations_key=1, recovered=1)  # seq 9 has no completion: info, and it was delivered
    assert r["status"] == "pass"


def test_recovered_info_or_uncompleted_sends_found_after_all(tmp_path):
    rows = [r for r in healthy(4) if not (r["op"] == "send" and r["type"] == "ok" and r["seq"] in (0, 1, 3))]
    rows = without(without(without(rows, "read", 3), "receive", 3), "ack", 3)
    rows = [r for r in rows if r["op"] != "scan"] + [scan(3, mid(2), mid(2))]
    r = judge(tmp_path, [*rows, send(0, "info", 106, error="Timeout"), send(3, "info", 136, error="Timeout")])
    only(r, recovered=2)  # seq 0 (info) and 1 (no completion) were stored; seq 3 was found nowhere
    assert r["status"] == "pass"
    assert (r["messages"]["info"], r["messages"]["indeterminate"], r["messages"]["acknowledged"]) == (3, 1, 1)


def test_messages_of_producers_that_sent_nothing_here_are_left_out(tmp_path):
    other = "r20251231-235959-ffff-p0"
    rows = healthy() + [read(0, 3, producer=other, message_id=mid(3)), receive(5, 1500, producer=other)]
    rows = [r for r in rows if r["op"] != "scan"] + [scan(4, mid(3), mid(3))]
    r = judge(tmp_path, rows)
    only(r)
    assert (r["status"], r["foreign"], len(r["notes"])) == ("pass", 2, 1)


@pytest.mark.parametrize(
    "scan_row",
    [None, scan(3, mid(1), mid(2)), scan(2, mid(1), mid(2), error="stalled: no message for 60 s"), scan(3, mid(2), None)],
    ids=["missing", "short-of-the-end", "stopped-with-an-error", "end-unknown"],
)
def test_an_incomplete_read_back_makes_the_verdict_inconclusive(tmp_path, scan_row):
    rows = [r for r in healthy() if r["op"] != "scan"] + ([scan_row] if scan_row else [])
    r = judge(tmp_path, rows)
    assert (r["status"], len(r["reasons"])) == ("inconclusive", 1)
    only(r)


def test_scan_complete_when_empty_and_past_the_end_in_a_later_ledger(tmp_path):
    rows = [r for r in healthy() if r["op"] != "scan"]
    rows += [scan(3, mid(0, ledger=9), mid(5)),  # ledger 9 > ledger 7: past the end
             scan(0, None, mid(-1, ledger=-1), topic=f"{T}-partition-1")]
    manifest = {"format": 1, "run": RUN, "topic": T, "partitions": 0, "finished": True, "drivers": []}
    assert judge(tmp_path, rows, manifest)["status"] == "pass"


def test_the_manifest_partitions_each_need_a_complete_scan(tmp_path):
    rows = [r for r in healthy() if r["op"] != "scan"] + [scan(3, mid(2), mid(2), topic=f"{T}-partition-0")]
    manifest = {"format": 1, "run": RUN, "topic": T, "partitions": 3, "finished": True, "drivers": []}
    r = judge(tmp_path, rows, manifest)
    assert (r["status"], len(r["reasons"])) == ("inconclusive", 2)  # a reason per partition without a complete scan
    assert "partition-1" in r["reasons"][0] and "partition-2" in r["reasons"][1]


def driver(name: str, mode: str, failed: bool) -> dict[str, Any]:
    return {"name": name, "mode": mode, "part": name, "exit_code": 1 if failed else 0, "failed": failed,
            "reason": "exit code 1" if failed else None}


@pytest.mark.parametrize(
    ("drivers", "finished", "corrupt", "status"),
    [
        ([driver("c0", "consume", True)], True, False, "inconclusive"),
        ([driver("c0", "consume", True)], True, True, "fail"),  # presence anomaly, no producer failed
        ([driver("p0", "produce", True)], True, True, "inconclusive"),  # a dead producer's journal may be short
        ([driver("p0", "produce", False)], False, False, "inconclusive"),  # workload run itself died
        ([driver("p0", "produce", False)], False, True, "fail"),
    ],
)
def test_failed_drivers_and_unfinished_runs_are_reasons(tmp_path, drivers, finished, corrupt, status):
    rows = healthy()
    if corrupt:
        rows = [*without(rows, "receive", 0), receive(0, 1000, payload_hash="deadbeef")]
    manifest = {"format": 1, "run": RUN, "topic": T, "partitions": 0, "finished": finished, "drivers": drivers}
    r = judge(tmp_path, rows, manifest)
    assert (r["status"], len(r["reasons"])) == (status, 1)


def test_lost_with_missing_evidence_is_inconclusive_not_fail(tmp_path):
    rows = [r for r in without(healthy(), "read", 1) if r["op"] != "scan"]
    r = judge(tmp_path, rows)
    only(r, lost=1)
    assert r["status"] == "inconclusive"


def test_two_directories_are_judged_as_one(tmp_path):
    rows = healthy()
    sends = [r for r in rows if r["op"] == "send"]
    write_table(tmp_path / "one", "producer", sends)
    write_table(tmp_path / "two", "rest", [r for r in rows if r["op"] != "send"])
    r = check([tmp_path / "one", tmp_path / "two"])
    assert r["status"] == "pass" and r["messages"]["stored"] == 3


def test_a_replica_missing_messages_is_not_replicated_and_one_never_read_is_missing_evidence(tmp_path):
    manifest = {"run": RUN, "topic": T, "partitions": 0, "finished": True, "drivers": [], "replication": {T: ["a", "b"]}}
    replica = [read(s, s, cluster="b", message_id=mid(s, 9)) for s in (0, 2)]
    r = judge(tmp_path / "gap", [*healthy(), *replica, scan(2, mid(2, 9), mid(2, 9), cluster="b")], manifest)
    assert (r["status"], r["reasons"]) == ("fail", [])
    only(r, not_replicated=1)
    whole = [read(s, s, cluster="b", message_id=mid(s, 9)) for s in range(3)]
    assert judge(tmp_path / "ok", [*healthy(), *whole, scan(3, mid(2, 9), mid(2, 9), cluster="b")], manifest)["status"] == "pass"
    unread = judge(tmp_path / "unread", healthy(), manifest)
    assert unread["status"] == "inconclusive" and any("on cluster b" in x for x in unread["reasons"])
