"""Where and how each anomaly kind of :mod:`bench.history_gen` is planted, and what it should yield alone."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.history_gen import FAIL, INFO, KEYS, KINDS, NONE, PRODUCERS, SPACING, T0, TOPIC, History, Planted, extend, hex8

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


class Planter:
    """One method per anomaly kind: it plants the anomaly in the history and returns what it should yield."""

    def __init__(self, h: History) -> None:
        self.h, self.m, self.s = h, h.m, Slots()
        self.dups: list[int] = []
        self.rereads: list[int] = []

    def lost(self) -> Planted:
        self.m.stored[self.s.take(3)] = False
        return Planted("fail", counts={"lost": 3})

    def never_delivered(self) -> Planted:
        self.m.delivered[self.s.take(3)] = False
        return Planted("fail", counts={"never_delivered": 3})

    def corrupted(self) -> Planted:
        a, b, c = self.s.take(3)
        self.m.recv_corrupt[[a, b]] = True
        self.m.read_corrupt[[b, c]] = True  # b is corrupted twice: still one message
        return Planted("fail", counts={"corrupted": 3})

    def duplicated_in_storage(self) -> Planted:
        self.dups += self.s.take(3)
        self.rereads += self.s.take(2)  # the same id read twice: not a duplicate
        return Planted("fail", counts={"duplicated_in_storage": 3})

    def duplicated_delivery(self) -> Planted:
        for i in self.s.take(3):  # received again after its ok ack (null type on cluster b)
            add(self.h, row(self.h, i, "receive", redelivery_count=1, ts=int(self.m.ack_ts[i]) + 1_000_000))
        for i in self.s.take(2):  # received again after a failed ack, before the ok one
            add(self.h, row(self.h, i, "ack", type="fail", error="timeout", ts=int(self.m.recv_ts[i]) + 100_000))
            add(self.h, row(self.h, i, "receive", redelivery_count=1, ts=int(self.m.recv_ts[i]) + 150_000))
        for i in self.s.take(2):  # redelivered before any ack: at-least-once
            add(self.h, row(self.h, i, "receive", redelivery_count=1, ts=int(self.m.recv_ts[i]) + 50_000))
        return Planted("fail", counts={"duplicated_delivery": 3})

    def unexpected(self) -> Planted:
        top = int(self.m.seq[self.m.prod == 0].max())
        extend(self.m, [0, 0], [top + 1, top + 2], [(top + 1) % KEYS, (top + 2) % KEYS], stored=True, delivered=True)
        add(
            self.h,
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
        return Planted("fail", counts={"unexpected": 3})

    def failed_but_stored(self) -> Planted:
        self.m.completion[self.s.take(3)] = FAIL
        return Planted("fail", counts={"failed_but_stored": 3})

    def recovered(self) -> Planted:
        a, b, c, lost_info, lost_fail = self.s.take(5)
        self.m.completion[[a, b, lost_info]] = INFO
        self.m.completion[c] = NONE  # the invoke never completed: info
        self.m.completion[lost_fail] = FAIL
        self.m.stored[[lost_info, lost_fail]] = False  # found nowhere: indeterminate / truly failed
        self.m.delivered[[lost_info, lost_fail]] = False
        return Planted("pass", counts={"recovered": 3})

    def order_violations_producer(self) -> Planted:
        for i in self.s.take(3):  # seq s+2 stored before seq s in their partition
            self.m.order[[i, i + 16]] = self.m.order[[i + 16, i]]
        return Planted("fail", counts={"order_violations_producer": 3})

    def order_violations_key(self) -> Planted:
        for i in self.s.take(3):  # seq s + KEYS delivered (and acknowledged) before seq s of the same key
            j = i + 8 * KEYS
            self.m.recv_ts[[i, j]], self.m.ack_ts[[i, j]] = self.m.recv_ts[[j, i]], self.m.ack_ts[[j, i]]
        return Planted("pass", counts={"order_violations_key": 3})

    def foreign(self) -> Planted:
        extend(self.m, [PRODUCERS, PRODUCERS], [0, 1], [0, 2], stored=True, delivered=False)
        extend(self.m, [PRODUCERS], [2], [4], stored=True, delivered=True)
        return Planted("pass", foreign=3)

    def idle_subscription(self) -> Planted:
        add(self.h, {"op": "subscribe", "topic": TOPIC, "cluster": "b", "consumer": "b-c0", "subscription": "idle", "ts": T0 - 1})
        stored_b = int(np.count_nonzero(self.m.stored & (self.m.cl == 1)))
        return Planted("fail", counts={"never_delivered": stored_b})

    def missing_scan(self) -> Planted:
        self.h.scan_edits[(1, 1)] = None
        return Planted("inconclusive", reasons=1)

    def incomplete_scan(self) -> Planted:
        self.h.scan_edits[(0, 1)] = lambda r: {"end_message_id": _later(r["message_id"])}
        return Planted("inconclusive", reasons=1)

    def scan_error(self) -> Planted:
        self.h.scan_edits[(1, 0)] = {"error": "stalled: no message for 60 s"}
        return Planted("inconclusive", reasons=1)

    def failed_consumer(self) -> Planted:
        self.h.failed["a-c1"] = "exit code 1"
        return Planted("inconclusive", reasons=1)

    def failed_producer(self) -> Planted:
        self.h.failed["p5"] = "did not finish; killed"
        self.m.recv_corrupt[self.s.take(1)] = True  # a presence anomaly does not make it fail when a producer died
        return Planted("inconclusive", reasons=1, counts={"corrupted": 1})

    def unfinished(self) -> Planted:
        self.h.finished = False
        return Planted("inconclusive", reasons=1)


# the order of the methods above: it decides the slots each kind takes, and idle_subscription counts
# the stored messages once unexpected and foreign have added theirs
PLANT_ORDER = tuple(name for name in vars(Planter) if name in KINDS)


def plant(h: History, kinds: set[str] | frozenset[str]) -> tuple[np.ndarray, np.ndarray, dict[str, Planted]]:
    """Apply ``kinds`` to the history; return the storage duplicates, the rereads and the expectations per kind."""
    planter = Planter(h)
    planted = {kind: getattr(planter, kind)() for kind in PLANT_ORDER if kind in kinds}
    return np.array(planter.dups, np.int64), np.array(planter.rereads, np.int64), planted


def _later(message_id: str) -> str:
    """The id five entries past ``message_id``: where the scan should have got to."""
    ledger, entry, *rest = message_id.strip("()").split(",")
    return f"({ledger},{int(entry) + 5},{','.join(rest)})"
