"""Producers and consumers that record every event of a run into a Parquet history.

Each message carries a small header ``<producer>:<seq>:<publish ns>:`` ahead of its padding, so a
consumer or reader knows what it got without a lookup, and the verifier can join sends,
deliveries and the storage view on (producer, seq).
"""

from __future__ import annotations

import random
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pulsar

from pulsarlab.runtime.roundtrip import client as make_client
from pulsarlab.workload.history import HistoryWriter, recover_journals

SUB_TYPES = {
    "exclusive": pulsar.ConsumerType.Exclusive,
    "failover": pulsar.ConsumerType.Failover,
    "shared": pulsar.ConsumerType.Shared,
    "key_shared": pulsar.ConsumerType.KeyShared,
}

# Outcomes after which the message certainly was not written; anything else but Ok is unknown.
DEFINITE_FAILURES = {
    pulsar.Result.ProducerQueueIsFull,
    pulsar.Result.MessageTooBig,
    pulsar.Result.InvalidMessage,
    pulsar.Result.InvalidTopicName,
    pulsar.Result.ProducerBlockedQuotaExceededError,
    pulsar.Result.ProducerBlockedQuotaExceededException,
    pulsar.Result.AuthorizationError,
    pulsar.Result.MemoryBufferIsFull,
}


@dataclass
class Target:
    """Where a workload connects: one cluster's service URL, plus every cluster to read back."""

    cluster: str
    service_url: str
    region: str | None = None
    read_clusters: dict[str, str] = field(default_factory=dict)


@dataclass
class WorkloadConfig:
    topic: str  # "" = a topic in the topology's first namespace
    partitions: int = 0
    producers: int = 1
    consumers: int = 1
    subscription: str = "pulsarlab"
    subscription_type: str = "shared"
    keys: int = 100
    rate: float = 1000.0  # messages/s over all producers; 0 = as fast as possible
    message_size: int = 256
    duration: float = 10.0
    batching: bool = True
    deduplication: bool = False
    drain_seconds: float = 5.0
    send_timeout_ms: int = 30_000
    max_pending: int = 1000

    def __post_init__(self) -> None:
        if self.subscription_type not in SUB_TYPES:
            raise ValueError(f"subscription type must be one of {', '.join(SUB_TYPES)}")
        if self.subscription_type in ("exclusive",) and self.consumers > 1:
            raise ValueError("an exclusive subscription takes one consumer")
        if self.producers < 1 or self.duration <= 0 or self.message_size < 32:
            raise ValueError("need producers >= 1, duration > 0 and message_size >= 32")


@dataclass
class Counters:
    """Live figures for progress display (updated from client threads)."""

    invoked: int = 0
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    received: int = 0
    stored: int = 0

    @property
    def in_flight(self) -> int:
        return self.invoked - self.acked - self.failed - self.unknown


@dataclass
class WorkloadResult:
    out: Path
    counters: Counters
    seconds: float
    send_rate: float


def encode(producer: str, seq: int, padding: bytes, size: int) -> tuple[bytes, int]:
    ts = time.time_ns()
    head = f"{producer}:{seq}:{ts}:".encode()
    return head + padding[: max(0, size - len(head))], ts


def decode(payload: bytes) -> tuple[str | None, int | None, int | None]:
    try:
        producer, seq, ts, _ = payload.split(b":", 3)
        return producer.decode(), int(seq), int(ts)
    except ValueError:
        return None, None, None


def payload_hash(payload: bytes) -> str:
    return f"{zlib.crc32(payload):08x}"


class Workload:
    """One run: producers and consumers in threads, then a read-back of storage on every cluster."""

    def __init__(self, config: WorkloadConfig, target: Target, out: Path):
        self.cfg = config
        self.target = target
        self.out = out
        self.counters = Counters()
        self._lock = threading.Lock()
        self._producing_done = threading.Event()
        self._errors: list[str] = []

    # ----- producing -------------------------------------------------------------------------
    def _producer(self, index: int, client: pulsar.Client, deadline: float) -> None:
        cfg, name = self.cfg, f"p{index}"
        rng = random.Random(index)
        padding = rng.randbytes(cfg.message_size)
        rate = cfg.rate / cfg.producers if cfg.rate > 0 else 0.0
        producer = client.create_producer(
            cfg.topic, producer_name=f"pulsarlab-{self.out.name}-{name}", batching_enabled=cfg.batching,
            block_if_queue_full=True, send_timeout_millis=cfg.send_timeout_ms, max_pending_messages=cfg.max_pending,
            batching_max_publish_delay_ms=5,
        )
        common = {"producer": name, "topic": cfg.topic, "cluster": self.target.cluster, "region": self.target.region}
        with HistoryWriter(self.out, f"producer-{name}") as hist:
            def done(seq: int, key: str, h: str, res: pulsar.Result, msg_id: pulsar.MessageId) -> None:
                if res == pulsar.Result.Ok:
                    hist.append(op="send", type="ok", seq=seq, key=key, payload_hash=h, message_id=str(msg_id), **common)
                    with self._lock:
                        self.counters.acked += 1
                else:
                    kind = "fail" if res in DEFINITE_FAILURES else "info"
                    hist.append(op="send", type=kind, seq=seq, key=key, payload_hash=h, error=str(res), **common)
                    with self._lock:
                        if kind == "fail":
                            self.counters.failed += 1
                        else:
                            self.counters.unknown += 1

            seq, start = 0, time.monotonic()
            while time.monotonic() < deadline:
                if rate:
                    ahead = start + seq / rate - time.monotonic()
                    if ahead > 0:
                        time.sleep(min(ahead, 0.05))
                        continue
                key = f"k{rng.randrange(cfg.keys)}"
                payload, ts = encode(name, seq, padding, cfg.message_size)
                h = payload_hash(payload)
                hist.append(op="send", type="invoke", seq=seq, key=key, payload_hash=h, ts=ts, **common)
                with self._lock:
                    self.counters.invoked += 1
                cb = (lambda s, k, hh: lambda res, mid: done(s, k, hh, res, mid))(seq, key, h)
                try:
                    producer.send_async(payload, cb, partition_key=key, sequence_id=seq)
                except Exception as exc:  # the client refused before sending: certainly not written
                    hist.append(op="send", type="fail", seq=seq, key=key, payload_hash=h, error=str(exc), **common)
                    with self._lock:
                        self.counters.failed += 1
                seq += 1
            try:
                producer.flush()
            except Exception as exc:  # outcomes still arrive through the callbacks
                self._errors.append(f"{name} flush: {exc}")
            wait_until = time.monotonic() + cfg.send_timeout_ms / 1000 + 5
            while self.counters.in_flight > 0 and time.monotonic() < wait_until:
                time.sleep(0.05)
            producer.close()

    # ----- consuming -------------------------------------------------------------------------
    def _consumer(self, index: int, client: pulsar.Client) -> None:
        cfg, name = self.cfg, f"c{index}"
        consumer = client.subscribe(
            cfg.topic, cfg.subscription, consumer_type=SUB_TYPES[cfg.subscription_type], consumer_name=name,
            initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000,
        )
        common = {"consumer": name, "subscription": cfg.subscription, "cluster": self.target.cluster,
                  "region": self.target.region}
        with HistoryWriter(self.out, f"consumer-{name}") as hist:
            idle_since = None
            while True:
                try:
                    msg = consumer.receive(timeout_millis=200)
                except pulsar.Timeout:
                    if self._producing_done.is_set():
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since > cfg.drain_seconds:
                            break
                    continue
                idle_since = None
                data = msg.data()
                producer, seq, pts = decode(data)
                mid = str(msg.message_id())
                hist.append(op="receive", message_id=mid, key=msg.partition_key() or None, producer=producer, seq=seq,
                            publish_ts=pts, payload_hash=payload_hash(data), redelivery_count=msg.redelivery_count(),
                            topic=msg.topic_name(), **common)
                consumer.acknowledge(msg)
                hist.append(op="ack", message_id=mid, key=msg.partition_key() or None, producer=producer, seq=seq,
                            topic=msg.topic_name(), **common)
                with self._lock:
                    self.counters.received += 1
            consumer.close()

    # ----- storage view ----------------------------------------------------------------------
    def read_back(self, cluster: str, service_url: str, timeout: float = 120.0) -> None:
        """Read every message of the topic from the earliest position: what storage holds."""
        topics = [f"{self.cfg.topic}-partition-{i}" for i in range(self.cfg.partitions)] or [self.cfg.topic]
        c = make_client(service_url)
        try:
            with HistoryWriter(self.out, f"read-{cluster}") as hist:
                for topic in topics:
                    reader = c.create_reader(topic, pulsar.MessageId.earliest)
                    index, deadline = 0, time.monotonic() + timeout
                    while reader.has_message_available() and time.monotonic() < deadline:
                        msg = reader.read_next(timeout_millis=10_000)
                        producer, seq, _ = decode(msg.data())
                        hist.append(op="read", message_id=str(msg.message_id()), producer=producer, seq=seq,
                                    key=msg.partition_key() or None, topic=topic, cluster=cluster, read_index=index,
                                    payload_hash=payload_hash(msg.data()))
                        index += 1
                        with self._lock:
                            self.counters.stored += 1
                    reader.close()
        finally:
            c.close()

    # ----- the run ---------------------------------------------------------------------------
    def run(self, tick: Callable[[Counters], None] | None = None) -> WorkloadResult:
        self.out.mkdir(parents=True, exist_ok=True)
        clients = [make_client(self.target.service_url) for _ in range(max(1, min(2, self.cfg.producers)))]
        cclient = make_client(self.target.service_url)
        t0 = time.monotonic()
        try:
            consumers = [threading.Thread(target=self._guard, args=(self._consumer, i, cclient), name=f"c{i}")
                         for i in range(self.cfg.consumers)]
            for t in consumers:
                t.start()
            time.sleep(0.5)  # let subscriptions exist before the first send
            p0 = time.monotonic()
            deadline = p0 + self.cfg.duration
            producers = [threading.Thread(target=self._guard, args=(self._producer, i, clients[i % len(clients)], deadline),
                                          name=f"p{i}") for i in range(self.cfg.producers)]
            for t in producers:
                t.start()
            while any(t.is_alive() for t in producers):
                if tick:
                    tick(self.counters)
                time.sleep(0.25)
            send_seconds = time.monotonic() - p0
            self._producing_done.set()
            while any(t.is_alive() for t in consumers):
                if tick:
                    tick(self.counters)
                time.sleep(0.25)
        finally:
            self._producing_done.set()
            for c in [*clients, cclient]:
                c.close()
        read_clusters = self.target.read_clusters or {self.target.cluster: self.target.service_url}
        for name, url in read_clusters.items():
            self.read_back(name, url)
            if tick:
                tick(self.counters)
        recover_journals(self.out)
        if self._errors:
            (self.out / "errors.txt").write_text("\n".join(self._errors) + "\n")
        return WorkloadResult(self.out, self.counters, time.monotonic() - t0, self.counters.acked / max(send_seconds, 1e-9))

    def _guard(self, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:  # recorded; the verifier judges the history
            self._errors.append(f"{threading.current_thread().name}: {type(exc).__name__}: {exc}")
