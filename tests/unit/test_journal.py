"""The workload driver's binary journal becomes the documented history rows (records built here by hand)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pulsarlab.history import SCHEMA, read_history
from pulsarlab.history.journal import (
    ACK_FAIL,
    EVENTS_SUFFIX,
    HAS_CRC,
    HAS_ID,
    HAS_PUBLISH_TS,
    HAS_READ_INDEX,
    HAS_REDELIVERY,
    HAS_SEQ,
    META_SUFFIX,
    RECORD,
    SCAN,
    STRINGS_SUFFIX,
    SUBSCRIBE,
    journal_to_parquet,
    read_events,
    write_meta,
)


def write_strings(base: Path, strings: list[str], torn_tail: bool = False) -> None:
    data = b"".join(struct.pack("<i", len(s.encode())) + s.encode() for s in strings)
    if torn_tail:
        data += struct.pack("<i", 50) + b"half a str"
    Path(f"{base}{STRINGS_SUFFIX}").write_bytes(data)


def records(*rows: dict) -> np.ndarray:
    r = np.zeros(len(rows), RECORD)
    for f in ("key", "producer", "topic", "aux"):
        r[f] = -1
    for i, row in enumerate(rows):
        for k, v in row.items():
            r[i][k] = v
    return r


def test_producer_journal_rows(tmp_path: Path) -> None:
    base = tmp_path / "producer-p0"
    write_meta(base, {"producer": "p0", "topic": "persistent://t/n/x", "cluster": "eu", "region": "eu-west"})
    write_strings(base, ["k1", "TimeoutException: timed out"])
    send = HAS_SEQ | HAS_CRC
    r = records(
        {"kind": 1, "flags": send, "key": 0, "ts": 100, "seq": 0, "crc": 0x0A0B0C0D},
        {"kind": 2, "flags": send | HAS_ID, "key": 0, "ts": 105, "seq": 0, "crc": 0x0A0B0C0D, "ledger": 18, "entry": 41,
         "partition": -1, "batch": 3},
        {"kind": 1, "flags": send, "key": 0, "ts": 110, "seq": 1, "crc": 0xFFFFFFFF},
        {"kind": 4, "flags": send, "key": 0, "ts": 200, "seq": 1, "crc": 0xFFFFFFFF, "aux": 1},
    )
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(r.tobytes() + r[:1].tobytes()[:37])  # a torn last record
    rows = read_events(base).to_pylist()
    assert [(x["op"], x["type"], x["seq"], x["ts"]) for x in rows] == [
        ("send", "invoke", 0, 100), ("send", "ok", 0, 105), ("send", "invoke", 1, 110), ("send", "info", 1, 200)
    ]
    assert {x["producer"] for x in rows} == {"p0"} and {x["cluster"] for x in rows} == {"eu"}
    assert {x["topic"] for x in rows} == {"persistent://t/n/x"} and {x["region"] for x in rows} == {"eu-west"}
    assert [x["message_id"] for x in rows] == [None, "(18,41,-1,3)", None, None]
    assert [x["payload_hash"] for x in rows] == ["0a0b0c0d", "0a0b0c0d", "ffffffff", "ffffffff"]
    assert [x["error"] for x in rows] == [None, None, None, "TimeoutException: timed out"]
    assert all(x["key"] == "k1" and x["consumer"] is None and x["read_index"] is None for x in rows)


def test_consumer_and_reader_rows_name_what_the_message_said(tmp_path: Path) -> None:
    base = tmp_path / "consumer-c0"
    write_meta(base, {"consumer": "c0", "subscription": "sub", "cluster": "eu"})
    write_strings(base, ["p3", "k9", "persistent://t/n/x-partition-1"], torn_tail=True)
    got = HAS_SEQ | HAS_PUBLISH_TS | HAS_ID
    r = records(
        {"kind": 5, "flags": got | HAS_CRC | HAS_REDELIVERY, "producer": 0, "key": 1, "topic": 2, "seq": 7, "ts": 50,
         "publish_ts": 40, "aux": 2, "crc": 1, "ledger": 5, "entry": 6, "partition": 1, "batch": -1},
        {"kind": 6, "flags": got, "producer": 0, "key": 1, "topic": 2, "seq": 7, "ts": 51, "publish_ts": 40,
         "ledger": 5, "entry": 6, "partition": 1, "batch": -1},
        # a payload without the header: no producer, no seq (the verifier calls it unexpected)
        {"kind": 5, "flags": HAS_ID | HAS_CRC | HAS_REDELIVERY, "topic": 2, "ts": 52, "ledger": 5, "entry": 7, "partition": 1,
         "batch": -1, "aux": 0},
    )
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(r.tobytes())
    rows = read_events(base).to_pylist()
    assert [(x["op"], x["producer"], x["seq"], x["key"]) for x in rows] == [
        ("receive", "p3", 7, "k9"), ("ack", "p3", 7, "k9"), ("receive", None, None, None)
    ]
    assert [x["redelivery_count"] for x in rows] == [2, None, 0]
    assert [x["publish_ts"] for x in rows] == [40, 40, None]
    assert {x["topic"] for x in rows} == {"persistent://t/n/x-partition-1"}
    assert [x["type"] for x in rows] == [None, "ok", None]  # an ack record is written when its receipt arrived
    assert {(x["consumer"], x["subscription"]) for x in rows} == {("c0", "sub")}
    assert rows[0]["message_id"] == "(5,6,1,-1)"

    base = tmp_path / "read-eu"
    write_meta(base, {"cluster": "eu"})
    write_strings(base, ["p0", "persistent://t/n/x"])
    r = records({"kind": 8, "flags": HAS_SEQ | HAS_ID | HAS_CRC | HAS_READ_INDEX, "producer": 0, "topic": 1, "seq": 3,
                 "read_index": 12, "ts": 9, "ledger": 1, "entry": 2, "partition": -1, "batch": -1})
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(r.tobytes())
    (row,) = read_events(base).to_pylist()
    assert (row["op"], row["producer"], row["seq"], row["read_index"], row["cluster"]) == ("read", "p0", 3, 12, "eu")


def test_subscribe_and_ack_outcomes_carry_the_run(tmp_path: Path) -> None:
    base = tmp_path / "consumer-c1"
    write_meta(base, {"consumer": "c1", "subscription": "audit", "cluster": "eu", "run": "r20261123-131502-4f2a"})
    write_strings(base, ["persistent://t/n/orders", "r20261123-131502-4f2a-p0", "k3", "AlreadyClosedException: closed"])
    got = HAS_SEQ | HAS_PUBLISH_TS | HAS_ID
    msg = {"producer": 1, "key": 2, "topic": 0, "seq": 41, "publish_ts": 7, "ledger": 18, "entry": 41, "partition": -1,
           "batch": -1}
    r = records(
        {"kind": SUBSCRIBE, "flags": 0, "topic": 0, "ts": 90},
        {"kind": 6, "flags": got, "ts": 101, **msg},
        {"kind": ACK_FAIL, "flags": got, "ts": 102, "aux": 3, **msg},
    )
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(r.tobytes())
    rows = read_events(base).to_pylist()
    sub, ok, fail = rows
    assert (sub["op"], sub["type"], sub["topic"], sub["consumer"], sub["subscription"], sub["cluster"], sub["ts"]) == (
        "subscribe", None, "persistent://t/n/orders", "c1", "audit", "eu", 90)
    assert (sub["message_id"], sub["producer"], sub["seq"], sub["key"], sub["error"]) == (None, None, None, None, None)
    assert [(x["op"], x["type"], x["error"]) for x in (ok, fail)] == [
        ("ack", "ok", None), ("ack", "fail", "AlreadyClosedException: closed")]
    assert {(x["producer"], x["seq"], x["key"], x["message_id"]) for x in (ok, fail)} == {
        ("r20261123-131502-4f2a-p0", 41, "k3", "(18,41,-1,-1)")}
    assert all(x["redelivery_count"] is None and x["end_message_id"] is None for x in rows)
    assert {x["run"] for x in rows} == {"r20261123-131502-4f2a"}


def test_scan_rows_say_how_far_each_scan_got(tmp_path: Path) -> None:
    base = tmp_path / "read-eu"
    write_meta(base, {"cluster": "eu", "run": "r1"})
    p0, p1, p2 = (f"persistent://t/n/x-partition-{i}" for i in range(3))
    write_strings(base, [p0, "(18,9120,0,-1)", p1, "(20,7,1,-1)", "stalled after 8 messages (idle 60 s)", p2,
                         "(21,-1,2,-1)", "end position unknown: admin call failed"])
    r = records(
        # complete: read 9121 messages, the last at the end position
        {"kind": SCAN, "flags": HAS_READ_INDEX | HAS_ID, "topic": 0, "key": 1, "read_index": 9121, "ts": 5,
         "ledger": 18, "entry": 9120, "partition": 0, "batch": -1},
        # stalled before the end
        {"kind": SCAN, "flags": HAS_READ_INDEX | HAS_ID, "topic": 2, "key": 3, "aux": 4, "read_index": 8, "ts": 6,
         "ledger": 20, "entry": 5, "partition": 1, "batch": 2},
        # an empty partition: nothing read, complete at once
        {"kind": SCAN, "flags": HAS_READ_INDEX, "topic": 5, "key": 6, "read_index": 0, "ts": 7},
        # the end position could not be asked for
        {"kind": SCAN, "flags": HAS_READ_INDEX, "topic": 5, "aux": 7, "read_index": 0, "ts": 8},
    )
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(r.tobytes())
    rows = read_events(base).to_pylist()
    assert [(x["op"], x["type"], x["topic"]) for x in rows] == [("scan", None, p0), ("scan", None, p1), ("scan", None, p2),
                                                               ("scan", None, p2)]
    assert [x["read_index"] for x in rows] == [9121, 8, 0, 0]
    assert [x["message_id"] for x in rows] == ["(18,9120,0,-1)", "(20,5,1,2)", None, None]
    assert [x["end_message_id"] for x in rows] == ["(18,9120,0,-1)", "(20,7,1,-1)", "(21,-1,2,-1)", None]
    assert [x["error"] for x in rows] == [None, "stalled after 8 messages (idle 60 s)", None,
                                          "end position unknown: admin call failed"]
    assert all(x["key"] is None and x["producer"] is None and x["seq"] is None for x in rows)
    assert {(x["cluster"], x["run"]) for x in rows} == {("eu", "r1")}


def test_left_over_journals_are_salvaged_into_parts(tmp_path: Path) -> None:
    base = tmp_path / "producer-p1"
    write_meta(base, {"producer": "p1"})
    write_strings(base, [])
    Path(f"{base}{EVENTS_SUFFIX}").write_bytes(records({"kind": 1, "flags": HAS_SEQ, "seq": 0, "ts": 1}).tobytes())
    empty = tmp_path / "consumer-c0"  # died before writing anything
    Path(f"{empty}{EVENTS_SUFFIX}").write_bytes(b"")
    table = read_history(tmp_path)
    assert table.schema == SCHEMA
    assert table.column("producer").to_pylist() == ["p1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["consumer-c0.parquet", "producer-p1.parquet"]
    assert pq.read_table(tmp_path / "consumer-c0.parquet").num_rows == 0
    assert not Path(f"{base}{META_SUFFIX}").exists()
    assert journal_to_parquet(base).name == "producer-p1.parquet"  # converting again keeps the part
    assert pq.read_table(tmp_path / "producer-p1.parquet").num_rows == 1
