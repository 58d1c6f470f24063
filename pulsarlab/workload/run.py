"""Producers and consumers that record every event of a run into a Parquet history.

Each message carries a small header ``<producer>:<seq>:<publish ns>:`` ahead of its padding, so a
consumer or reader knows what it got without a lookup, and the verifier can join sends,
deliveries and the storage view on (producer, seq).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import random
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import _pulsar  # the compiled client under the `pulsar` wrapper: its message builder, without the wrapper's checks
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
    """Live figures for progress display (gathered from the child processes' shared counters)."""

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


# ----- child processes ------------------------------------------------------------------------
# Every producer and every consumer runs in a process of its own (one client, one history part), so
# the per-message Python work of several of them is not serialised by one GIL. The parent starts
# them, releases the producers together, and reads their live figures from shared memory.

INVOKED, ACKED, FAILED, UNKNOWN, RECEIVED = range(5)
SLOTS = 5
KEY_CYCLE = 1 << 12  # a producer draws this many random keys up front and cycles through them
BATCH_MAX_BYTES = 4 * 1024 * 1024  # as pulsar-perf's default: batches are bounded by count and delay, not size


@dataclass
class _Child:
    """What a child process shares with the parent."""

    name: str
    slots: Any  # multiprocessing Array of SLOTS int64: this child's live counters
    done_at: Any  # multiprocessing Value: monotonic time the producer's last outcome arrived (0 = not yet)
    status: Any  # multiprocessing Queue: ("ready", name) and ("error", text)
    start: Any  # multiprocessing Event: producers begin; consumers are started before it is set
    deadline: Any  # multiprocessing Value: monotonic time producing ends, set before ``start``
    producing_done: Any  # multiprocessing Event: every producer finished


@contextlib.contextmanager
def _live_counters(counts: list[int], slots: Any, every: float = 0.1) -> Iterator[None]:
    """While in the block, copy a child's counters to shared memory every ``every`` s; once more at the end."""
    stop = threading.Event()

    def publish() -> None:
        while not stop.wait(every):
            slots[:SLOTS] = counts

    publisher = threading.Thread(target=publish, name="counters", daemon=True)
    publisher.start()
    try:
        yield
    finally:
        stop.set()
        publisher.join()
        slots[:SLOTS] = counts


def _child_main(kind: str, index: int, cfg: WorkloadConfig, target: Target, out: Path, shared: _Child) -> None:
    try:
        (_produce if kind == "producer" else _consume)(index, cfg, target, out, shared)
    except BaseException as exc:  # reported to the parent, which records it; the verifier judges the history
        shared.status.put(("error", f"{shared.name}: {type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


def _produce(index: int, cfg: WorkloadConfig, target: Target, out: Path, shared: _Child) -> None:
    name = f"p{index}"
    rng = random.Random(index)
    padding = rng.randbytes(cfg.message_size)
    keys = [f"k{rng.randrange(cfg.keys)}" for _ in range(KEY_CYCLE)]
    pads = [padding[: max(0, cfg.message_size - n)] for n in range(cfg.message_size + 128)]
    prefix = name.encode()
    rate = cfg.rate / cfg.producers if cfg.rate > 0 else 0.0
    # invoked (main thread), acked (client thread); failed and unknown under `lock` (inline or client callbacks)
    counts, lock = [0] * SLOTS, threading.Lock()
    client = make_client(target.service_url)
    with contextlib.closing(client), _live_counters(counts, shared.slots):
        producer = client.create_producer(
            cfg.topic, producer_name=f"pulsarlab-{out.name}-{name}", batching_enabled=cfg.batching,
            block_if_queue_full=True, send_timeout_millis=cfg.send_timeout_ms, max_pending_messages=cfg.max_pending,
            batching_max_publish_delay_ms=5,
            batching_max_allowed_size_in_bytes=BATCH_MAX_BYTES, compression_type=pulsar.CompressionType.NONE,
        )
        constants = {"producer": name, "topic": cfg.topic, "cluster": target.cluster, "region": target.region}
        with HistoryWriter(out, f"producer-{name}", send_constants=constants) as hist:
            record, now, crc = hist.append_send, time.time_ns, zlib.crc32

            def finish(seq: int, key: str, h: int, kind: str, error: str) -> None:
                record(kind, seq, key, h, now(), None, error)
                with lock:
                    counts[FAILED if kind == "fail" else UNKNOWN] += 1

            def done(seq: int, key: str, h: int, res: pulsar.Result, msg_id: pulsar.MessageId) -> None:
                if res.value == 0:  # Result.Ok; comparing enum objects costs far more
                    record("ok", seq, key, h, now(), msg_id)  # the id becomes text when flushed
                    counts[ACKED] += 1
                else:
                    finish(seq, key, h, "fail" if res in DEFINITE_FAILURES else "info", str(res))

            # The wrapper's send_async type-checks every argument; its message builder is the same.
            raw = getattr(producer, "_producer", None)
            send = raw.send_async if raw is not None else producer.send_async
            build = _pulsar.MessageBuilder if raw is not None else None
            shared.status.put(("ready", name))
            shared.start.wait()
            deadline, start, seq = shared.deadline.value, time.monotonic(), 0
            burst = 1 if rate else 64  # messages between clock reads when unthrottled
            while True:
                t = time.monotonic()
                if t >= deadline:
                    break
                if rate:
                    ahead = start + seq / rate - t
                    if ahead > 0:
                        time.sleep(min(ahead, 0.05))
                        continue
                for _ in range(burst):
                    key, ts = keys[seq % KEY_CYCLE], now()
                    head = b"%b:%d:%d:" % (prefix, seq, ts)
                    payload = head + pads[len(head)]
                    h = crc(payload)
                    record("invoke", seq, key, h, ts)
                    counts[INVOKED] = seq + 1
                    try:
                        if build is None:
                            send(payload, partial(done, seq, key, h), partition_key=key, sequence_id=seq)
                        else:
                            mb = build().content(payload).partition_key(key)
                            if seq:  # as the wrapper: 0 is left to the client's own counter
                                mb.sequence_id(seq)
                            send(mb.build(), partial(done, seq, key, h))
                    except Exception as exc:  # the client refused before sending: certainly not written
                        finish(seq, key, h, "fail", str(exc))
                    seq += 1
            try:
                producer.flush()
            except Exception as exc:  # outcomes still arrive through the callbacks
                shared.status.put(("error", f"{name} flush: {exc}"))
            wait_until = time.monotonic() + cfg.send_timeout_ms / 1000 + 5
            while counts[ACKED] + counts[FAILED] + counts[UNKNOWN] < counts[INVOKED] and time.monotonic() < wait_until:
                time.sleep(0.01)
            shared.done_at.value = time.monotonic()
            producer.close()


def _consume(index: int, cfg: WorkloadConfig, target: Target, out: Path, shared: _Child) -> None:
    name = f"c{index}"
    counts = [0] * SLOTS
    client = make_client(target.service_url)
    with contextlib.closing(client), _live_counters(counts, shared.slots):
        consumer = client.subscribe(
            cfg.topic, cfg.subscription, consumer_type=SUB_TYPES[cfg.subscription_type], consumer_name=name,
            initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000,
        )
        common = {"consumer": name, "subscription": cfg.subscription, "cluster": target.cluster, "region": target.region}
        with HistoryWriter(out, f"consumer-{name}") as hist:
            shared.status.put(("ready", name))
            idle_since = None
            while True:
                try:
                    msg = consumer.receive(timeout_millis=200)
                except pulsar.Timeout:
                    if shared.producing_done.is_set():
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since > cfg.drain_seconds:
                            break
                    continue
                idle_since = None
                data = msg.data()
                producer, seq, pts = decode(data)
                mid, key, topic = str(msg.message_id()), msg.partition_key() or None, msg.topic_name()
                hist.append(op="receive", message_id=mid, key=key, producer=producer, seq=seq, publish_ts=pts,
                            payload_hash=payload_hash(data), redelivery_count=msg.redelivery_count(), topic=topic, **common)
                consumer.acknowledge(msg)
                hist.append(op="ack", message_id=mid, key=key, producer=producer, seq=seq, topic=topic, **common)
                counts[RECEIVED] += 1
            consumer.close()


class Workload:
    """One run: producers and consumers in processes of their own, then a read-back of storage on every cluster.

    The processes are spawned, so a script that calls :meth:`run` must guard its entry point with
    ``if __name__ == "__main__":`` (see the multiprocessing documentation).
    """

    def __init__(self, config: WorkloadConfig, target: Target, out: Path):
        self.cfg = config
        self.target = target
        self.out = out
        self.counters = Counters()
        self._lock = threading.Lock()
        self._errors: list[str] = []

    # ----- storage view ----------------------------------------------------------------------
    def read_back(self, cluster: str, service_url: str, idle_timeout: float = 60.0) -> None:
        """Read every message of the topic from the earliest position: what storage holds.
        Gives up on a topic only after ``idle_timeout`` seconds without a message (and says so)."""
        topics = [f"{self.cfg.topic}-partition-{i}" for i in range(self.cfg.partitions)] or [self.cfg.topic]
        c = make_client(service_url)
        try:
            with HistoryWriter(self.out, f"read-{cluster}") as hist:
                for topic in topics:
                    reader = c.create_reader(topic, pulsar.MessageId.earliest)
                    index, deadline = 0, time.monotonic() + idle_timeout
                    while reader.has_message_available():
                        if time.monotonic() > deadline:
                            self._errors.append(f"read-back of {topic} on {cluster} stalled after {index} messages")
                            break
                        try:
                            msg = reader.read_next(timeout_millis=10_000)
                        except pulsar.Timeout:
                            continue
                        deadline = time.monotonic() + idle_timeout
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
        ctx = mp.get_context("spawn")  # no fork: the parent may hold client threads and locks
        status, start, producing_done = ctx.Queue(), ctx.Event(), ctx.Event()
        deadline = ctx.Value("d", 0.0, lock=False)
        children: dict[str, tuple[_Child, mp.process.BaseProcess]] = {}

        def spawn(kind: str, index: int) -> None:
            name = f"{kind[0]}{index}"
            shared = _Child(name, ctx.Array("q", SLOTS, lock=False), ctx.Value("d", 0.0, lock=False), status, start, deadline,
                            producing_done)
            proc = ctx.Process(target=_child_main, args=(kind, index, self.cfg, self.target, self.out, shared),
                               name=f"pulsarlab-{name}", daemon=True)
            proc.start()
            children[name] = (shared, proc)

        t0 = time.monotonic()
        try:
            for i in range(self.cfg.consumers):  # subscriptions exist before the first send
                spawn("consumer", i)
            self._await_ready([n for n in children if n.startswith("c")], children, status)
            for i in range(self.cfg.producers):
                spawn("producer", i)
            producers = [n for n in children if n.startswith("p")]
            self._await_ready(producers, children, status)
            p0 = time.monotonic()
            deadline.value = p0 + self.cfg.duration
            start.set()
            self._follow(producers, children, status, tick)
            ends = [children[n][0].done_at.value for n in producers]
            send_seconds = (max(ends) if all(ends) else time.monotonic()) - p0
            producing_done.set()
            self._follow(list(children), children, status, tick)
        finally:
            start.set()
            producing_done.set()
            for _, proc in children.values():
                proc.join(timeout=self.cfg.send_timeout_ms / 1000 + self.cfg.drain_seconds + 30)
                if proc.is_alive():  # a stuck client: its journal is salvaged below
                    self._errors.append(f"{proc.name}: did not finish; killed")
                    proc.kill()
                    proc.join()
                elif proc.exitcode:
                    self._errors.append(f"{proc.name}: exit code {proc.exitcode}")
            self._drain(status)
            self._gather(children)
        read_clusters = self.target.read_clusters or {self.target.cluster: self.target.service_url}
        for name, url in read_clusters.items():
            self.read_back(name, url)
            if tick:
                tick(self.counters)
        recover_journals(self.out)
        if self._errors:
            (self.out / "errors.txt").write_text("\n".join(self._errors) + "\n")
        return WorkloadResult(self.out, self.counters, time.monotonic() - t0, self.counters.acked / max(send_seconds, 1e-9))

    def _await_ready(self, names: list[str], children: dict, status: Any, timeout: float = 120.0) -> None:
        """Wait until each child said it is ready (client connected, writer open), reported an error or died."""
        pending, deadline = set(names), time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            pending -= {n for n in pending if not children[n][1].is_alive()}
            try:
                what, text = status.get(timeout=0.25)
            except queue.Empty:
                continue
            if what == "ready":
                pending.discard(text)
            else:
                self._errors.append(text)
                pending.discard(text.split(":", 1)[0])
        if pending:
            self._errors.append(f"not ready after {timeout:.0f} s: {', '.join(sorted(pending))}")

    def _follow(self, names: list[str], children: dict, status: Any, tick: Callable[[Counters], None] | None) -> None:
        """Until those children exit: record their errors and show their live counters."""
        while any(children[n][1].is_alive() for n in names):
            self._drain(status)
            self._gather(children)
            if tick:
                tick(self.counters)
            time.sleep(0.25)

    def _drain(self, status: Any) -> None:
        while True:
            try:
                what, text = status.get_nowait()
            except queue.Empty:
                return
            if what == "error":
                self._errors.append(text)

    def _gather(self, children: dict) -> None:
        totals = [0] * SLOTS
        for shared, _ in children.values():
            for i, v in enumerate(shared.slots[:SLOTS]):
                totals[i] += v
        c = self.counters
        c.invoked, c.acked, c.failed, c.unknown, c.received = totals[INVOKED], totals[ACKED], totals[FAILED], \
            totals[UNKNOWN], totals[RECEIVED]
