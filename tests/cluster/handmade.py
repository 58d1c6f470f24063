"""Small hand-made histories, complete per docs/history.md, for tests that run the verifier end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pulsarlab.history import write_table

NS = 1_000_000_000
START = 1_800_000_000 * NS
TOPIC = "persistent://public/default/handmade"
PRODUCER = "r20270115-080000-beef-p0"


def handmade_history(directory: Path, messages: int = 40, lose: int | None = None) -> Path:
    """One producer, one consumer on subscription ``audit``, one complete storage scan.

    ``lose``: the seq of one acknowledged message that storage and the consumer never saw (not the
    last one, so the scan still reaches the partition's end).
    """
    assert lose is None or 0 <= lose < messages - 1
    ids = [f"(9,{seq},-1,-1)" for seq in range(messages)]
    where = {"topic": TOPIC, "cluster": "eu", "region": "eu"}
    sub = {"subscription": "audit", "consumer": "c0", **where}
    produced: list[dict[str, Any]] = []
    consumed: list[dict[str, Any]] = [{"op": "subscribe", "ts": START - NS, **sub}]
    read: list[dict[str, Any]] = []
    for seq in range(messages):
        msg = {"producer": PRODUCER, "seq": seq, "key": f"k{seq % 3}", **where}
        sent = START + seq * NS // 10
        produced += [
            {"op": "send", "type": "invoke", "ts": sent, **msg},
            {"op": "send", "type": "ok", "ts": sent + 3_000_000, "message_id": ids[seq], **msg},
        ]
        if seq == lose:
            continue
        got = {"message_id": ids[seq], "publish_ts": sent, **msg, **sub}
        consumed += [
            {"op": "receive", "ts": sent + 5_000_000, "redelivery_count": 0, **got},
            {"op": "ack", "type": "ok", "ts": sent + 6_000_000, **got},
        ]
        read.append({"op": "read", "ts": START + 60 * NS, "read_index": len(read), "message_id": ids[seq], **msg})
    read.append({"op": "scan", "ts": START + 61 * NS, "read_index": len(read), "message_id": ids[-1],
                 "end_message_id": ids[-1], **where})
    write_table(directory, "producer-p0", produced)
    write_table(directory, "consumer-c0", consumed)
    write_table(directory, "read-eu", read)
    return directory
