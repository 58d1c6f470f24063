"""Where and how each anomaly kind of :mod:`bench.history_gen` is planted, and what it should yield alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.history_gen import FAIL, INFO, KEYS, NONE, PRODUCERS, SPACING, T0, TOPIC, History, Planted, extend, hex8

PARTITIONED = f"{TOPIC}-partition-"


class Slots:
    """Hands out message indices far enough apart that no two planted anomalies touch."""

    def __init__(self) -> None:
        self.next = 1

    def take(self, count: int) -> list[int]:
        out = [SPACING * (self.next + i) for i in range(count)]
        self.next += count
        return out


def row(h: History, i: int, op: str, **kw: Any) -> dict[str, Any]:
    """A hand-made row about message ``i``, consistent with the generated ones."""
    m = h.m
    cluster = "ab"[int(m.cl[i])]
    return {
        "op": op,
        "producer": h.producers[int(m.prod[i])],
        "seq": int(m.seq[i]),
        "key": h.keys[int(m.keyi[i])],
        "topic": f"{PARTITIONED}{int(m.part[i])}",
        "cluster": cluster,
        "consumer": f"{cluster}-c{int(m.consumer[i])}",
        "subscription": "sub",
        "message_id": f"(1,{i},-1,-1)",
        "run": "r20260101-000000-beef",
        "payload_hash": hex8(np.array([(int(m.vt[i]) * 2_654_435_761) & 0xFFFFFFFF]))[0].as_py() if op == "receive" else None,
        **kw,
    }


def add(h: History, r: dict[str, Any]) -> None:
    h.extra.setdefault(r["consumer"], []).append(r)


def plant(h: History, kinds: set[str] | frozenset[str]) -> tuple[np.ndarray, np.ndarray, dict[str, Planted]]:
    """Apply ``kinds`` to the history; return the storage duplicates, the rereads and the expectations per kind."""
    m, s = h.m, Slots()
    dups: list[int] = []
    rereads: list[int] = []
    planted: dict[str, Planted] = {}
    if "lost" in kinds:
        m.stored[s.take(3)] = False
        planted["lost"] = Planted("fail", counts={"lost": 3})
    if "never_delivered" in kinds:
        m.delivered[s.take(3)] = False
        planted["never_delivered"] = Planted("fail", counts={"never_delivered": 3})
    if "corrupted" in kinds:
        a, b, c = s.take(3)
        m.recv_corrupt[[a, b]] = True
        m.read_corrupt[[b, c]] = True  # b is corrupted twice: still one message
        planted["corrupted"] = Planted("fail", counts={"corrupted": 3})
    if "duplicated_in_storage" in kinds:
        dups += s.take(3)
        rereads += s.take(2)  # the same id read twice: not a duplicate
        planted["duplicated_in_storage"] = Planted("fail", counts={"duplicated_in_storage": 3})
    if "duplicated_delivery" in kinds:
        for i in s.take(3):  # received again after its ok ack (null type on cluster b)
            add(h, row(h, i, "receive", redelivery_count=1, ts=int(m.ack_ts[i]) + 1_000_000))
        for i in s.take(2):  # received again after a failed ack, before the ok one
            add(h, row(h, i, "ack", type="fail", error="timeout", ts=int(m.recv_ts[i]) + 100_000))
            add(h, row(h, i, "receive", redelivery_count=1, ts=int(m.recv_ts[i]) + 150_000))
        for i in s.take(2):  # redelivered before any ack: at-least-once
            add(h, row(h, i, "receive", redelivery_count=1, ts=int(m.recv_ts[i]) + 50_000))
        planted["duplicated_delivery"] = Planted("fail", counts={"duplicated_delivery": 3})
    if "unexpected" in kinds:
        top = int(m.seq[m.prod == 0].max())
        extend(m, [0, 0], [top + 1, top + 2], [(top + 1) % KEYS, (top + 2) % KEYS], stored=True, delivered=True)
        add(
            h,
            {
                "op": "receive",
                "topic": f"{PARTITIONED}0",
                "cluster": "a",
                "consumer": "a-c0",
                "subscription": "sub",
                "message_id": "(999,1,0,-1)",
                "ts": T0 + 5_000_000,
            },
        )  # no producer/seq header at all
        planted["unexpected"] = Planted("fail", counts={"unexpected": 3})
    if "failed_but_stored" in kinds:
        m.completion[s.take(3)] = FAIL
        planted["failed_but_stored"] = Planted("fail", counts={"failed_but_stored": 3})
    if "recovered" in kinds:
        a, b, c, lost_info, lost_fail = s.take(5)
        m.completion[[a, b, lost_info]] = INFO
        m.completion[c] = NONE  # the invoke never completed: info
        m.completion[lost_fail] = FAIL
        m.stored[[lost_info, lost_fail]] = False  # found nowhere: indeterminate / truly failed
        m.delivered[[lost_info, lost_fail]] = False
        planted["recovered"] = Planted("pass", counts={"recovered": 3})
    if "order_violations_producer" in kinds:
        for i in s.take(3):  # seq s+2 stored before seq s in their partition
            m.order[[i, i + 16]] = m.order[[i + 16, i]]
        planted["order_violations_producer"] = Planted("fail", counts={"order_violations_producer": 3})
    if "order_violations_key" in kinds:
        for i in s.take(3):  # seq s + KEYS delivered (and acknowledged) before seq s of the same key
            j = i + 8 * KEYS
            m.recv_ts[[i, j]], m.ack_ts[[i, j]] = m.recv_ts[[j, i]], m.ack_ts[[j, i]]
        planted["order_violations_key"] = Planted("pass", counts={"order_violations_key": 3})
    if "foreign" in kinds:
        extend(m, [PRODUCERS, PRODUCERS], [0, 1], [0, 2], stored=True, delivered=False)
        extend(m, [PRODUCERS], [2], [4], stored=True, delivered=True)
        planted["foreign"] = Planted("pass", foreign=3)
    if "idle_subscription" in kinds:
        add(h, {"op": "subscribe", "topic": TOPIC, "cluster": "b", "consumer": "b-c0", "subscription": "idle", "ts": T0 - 1})
        stored_b = int(np.count_nonzero(m.stored & (m.cl == 1)))
        planted["idle_subscription"] = Planted("fail", counts={"never_delivered": stored_b})
    if "missing_scan" in kinds:
        h.scan_edits[(1, 1)] = None
        planted["missing_scan"] = Planted("inconclusive", reasons=1)
    if "incomplete_scan" in kinds:
        h.scan_edits[(0, 1)] = lambda r: {"end_message_id": _later(r["message_id"])}
        planted["incomplete_scan"] = Planted("inconclusive", reasons=1)
    if "scan_error" in kinds:
        h.scan_edits[(1, 0)] = {"error": "stalled: no message for 60 s"}
        planted["scan_error"] = Planted("inconclusive", reasons=1)
    if "failed_consumer" in kinds:
        h.failed["a-c1"] = "exit code 1"
        planted["failed_consumer"] = Planted("inconclusive", reasons=1)
    if "failed_producer" in kinds:
        h.failed["p5"] = "did not finish; killed"
        m.recv_corrupt[s.take(1)] = True  # a presence anomaly does not make it fail when a producer died
        planted["failed_producer"] = Planted("inconclusive", reasons=1, counts={"corrupted": 1})
    if "unfinished" in kinds:
        h.finished = False
        planted["unfinished"] = Planted("inconclusive", reasons=1)
    return np.array(dups, np.int64), np.array(rereads, np.int64), planted


def _later(message_id: str) -> str:
    """The id five entries past ``message_id``: where the scan should have got to."""
    ledger, entry, *rest = message_id.strip("()").split(",")
    return f"({ledger},{int(entry) + 5},{','.join(rest)})"
