"""Producers and consumers that record every event of a run into a Parquet history.

Every producer, consumer and storage reader is a JVM of its own running the workload driver
(:mod:`pulsarlab.workload.driver`) with the Java client of the cluster's own distribution; this
module starts and steers them, shows their live counters and turns their journals into the run's
Parquet parts.

Each message carries a small header ``<producer>:<seq>:<publish ns>:`` ahead of its padding, so a
consumer or reader knows what it got without a lookup, and the verifier can join sends,
deliveries and the storage view on (producer, seq). Producer names carry the run id
(``<run>-p<i>``), so two runs on one topic never share a message.

Before the storage read-back, the admin API of each read cluster is asked for the last message id
of every partition: each reader scans to that position and says in a ``scan`` row whether it got
there. The manifest ``_run.json`` records the run and how each driver ended.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulsarlab.admin.client import AdminClient, AdminError
from pulsarlab.distribution import Distribution
from pulsarlab.history.manifest import DriverOutcome, Manifest, new_run_id
from pulsarlab.progress import NO_PROGRESS, Reporter
from pulsarlab.security import ClientAuth
from pulsarlab.timeouts import timeout
from pulsarlab.workload.driver import QUICK_JIT_MAX_RATE, DriverProcess, driver_classes

SUB_TYPES = ("exclusive", "failover", "shared", "key_shared")
READY_TIMEOUT = 120.0


@dataclass
class Target:
    """Where a workload connects: one cluster's service URL, plus every cluster to read back (its
    service URL in ``read_clusters``, its brokers' web URLs, comma-separated, in ``read_admin_urls``)."""

    cluster: str
    service_url: str
    region: str | None = None
    read_clusters: dict[str, str] = field(default_factory=dict)
    read_admin_urls: dict[str, str] = field(default_factory=dict)
    consume_cluster: str | None = None  # where the consumers connect; None: the producers' cluster
    consume_service_url: str | None = None
    replication: list[str] = field(default_factory=list)  # the clusters the topic replicates to (geo), if several
    replicated_subscription: bool = False  # consumers replicate their position to the other clusters
    auth: ClientAuth | None = None  # a secure cluster: the workload role's token and the CA
    admin_auth: ClientAuth | None = None  # ... and the admin's, for the end positions of the read-back

    def driver_auth(self) -> dict[str, str]:
        return self.auth.java_config() if self.auth else {}

    @property
    def consumer_cluster(self) -> str:
        return self.consume_cluster or self.cluster

    @property
    def consumer_url(self) -> str:
        return self.consume_service_url or self.service_url


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
    # while draining, a consumer without a broker (moving to a new owner) does not count as idle for
    # up to this long (a subscribe that times out, 30 s, and its retry): an ownership move in the
    # last seconds must not end the drain
    drain_reconnect_seconds: float = 60.0
    send_timeout_ms: int = 30_000
    max_pending: int = 1000
    max_pending_acks: int = 1000  # per consumer: acknowledgements awaiting their receipt
    # the longest a client waits between reconnection attempts (the Java client's default is 60 s):
    # short, so that an outage measured is the cluster's, not the client's back-off
    max_backoff_ms: int = 5000
    # the Java client's own cluster failover (AutoClusterFailover, PIP-121): producers and consumers
    # start on their cluster, move to the next cluster the topic replicates to once theirs has not
    # answered for failover_delay_ms, and back once it has answered again for switch_back_delay_ms
    client_failover: bool = False
    failover_delay_ms: int = 3000
    switch_back_delay_ms: int = 10_000
    failover_check_ms: int = 500

    def __post_init__(self) -> None:
        if self.subscription_type not in SUB_TYPES:
            raise ValueError(f"subscription type must be one of {', '.join(SUB_TYPES)}")
        if self.partitions < 0 or self.consumers < 0 or self.keys < 1 or self.rate < 0 or self.max_pending < 1:
            raise ValueError("need partitions >= 0, consumers >= 0, keys >= 1, rate >= 0 and max_pending >= 1")
        if self.subscription_type in ("exclusive",) and self.consumers > 1:
            raise ValueError("an exclusive subscription takes one consumer")
        if self.producers < 1 or self.duration <= 0 or self.message_size < 32:
            raise ValueError("need producers >= 1, duration > 0 and message_size >= 32")
        if min(self.failover_delay_ms, self.switch_back_delay_ms, self.failover_check_ms) < 0 or self.failover_check_ms == 0:
            raise ValueError("need failover_delay_ms >= 0, switch_back_delay_ms >= 0 and failover_check_ms > 0")


def failover_problem(cfg: WorkloadConfig, target: Target) -> str | None:
    """Why the clients cannot fail over between clusters (None: they can, or are not asked to)."""
    if not cfg.client_failover:
        return None
    if len(target.replication) < 2:
        return (f"client failover needs a topic replicated to another cluster: {cfg.topic or 'the topic'} lives on "
                f"{target.cluster} only (use a namespace of a geo or active-active topology)")
    # a secure deployment: one token and one CA serve every cluster of it, and the Java client keeps
    # its own credentials when it switches to a cluster given none of its own (AutoClusterFailover)
    return None


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
    errors: list[str] = field(default_factory=list)  # what the drivers reported, also in errors.txt
    failed: list[DriverOutcome] = field(default_factory=list)  # drivers that failed: the verdict is inconclusive
    run: str = ""
    ended_early: str | None = None  # why sending ended before the configured duration, if it did


class Workload:
    """One run: producers and consumers in driver processes of their own, then a read-back of storage on every cluster."""

    def __init__(self, config: WorkloadConfig, target: Target, out: Path, dist: Distribution, run_id: str | None = None):
        self.cfg = config
        self.target = target
        self.out = out
        self.dist = dist
        self.run_id = run_id or new_run_id()
        self.counters = Counters()
        self._errors: list[str] = []
        self._drivers: list[DriverProcess] = []
        self._producers: list[DriverProcess] = []
        self._ending = threading.Event()
        self._quick_jit = 0 < config.rate <= QUICK_JIT_MAX_RATE
        self.manifest = Manifest(self.run_id, config.topic, config.partitions, target.cluster, list(self._read_clusters()),
                                 config.subscription, consume_cluster=target.consumer_cluster,
                                 replication={config.topic: sorted(target.replication)} if len(target.replication) > 1 else {})

    # ----- the processes ---------------------------------------------------------------------
    def _producer(self, i: int) -> DriverProcess:
        cfg, t = self.cfg, self.target
        name = f"{self.run_id}-p{i}"  # in the history, in each message's header and as the Pulsar producer name
        config = {
            "service_url": t.service_url, "topic": cfg.topic, "producer_name": name,
            "message_size": cfg.message_size, "rate": cfg.rate / cfg.producers, "batching": cfg.batching,
            "send_timeout_ms": cfg.send_timeout_ms, "max_pending": cfg.max_pending, "keys": cfg.keys, "seed": i,
            "max_backoff_ms": cfg.max_backoff_ms, **t.driver_auth(), **self._failover(t.cluster),
        }
        constants = {"producer": name, "topic": cfg.topic, "cluster": t.cluster, "region": t.region, "run": self.run_id}
        return DriverProcess(f"p{i}", "produce", self.out, f"producer-p{i}", config, constants)

    def _consumer(self, i: int) -> DriverProcess:
        cfg, t = self.cfg, self.target
        config = {"service_url": t.consumer_url, "topic": cfg.topic, "subscription": cfg.subscription,
                  "subscription_type": cfg.subscription_type, "drain_seconds": cfg.drain_seconds,
                  "drain_reconnect_seconds": cfg.drain_reconnect_seconds,
                  "max_pending_acks": cfg.max_pending_acks, "replicate_subscription": t.replicated_subscription,
                  "max_backoff_ms": cfg.max_backoff_ms, **t.driver_auth(), **self._failover(t.consumer_cluster)}
        constants = {"consumer": f"c{i}", "subscription": cfg.subscription, "cluster": t.consumer_cluster, "region": t.region,
                     "run": self.run_id}
        return DriverProcess(f"c{i}", "consume", self.out, f"consumer-c{i}", config, constants)

    def _failover(self, home: str) -> dict[str, Any]:
        """A client's failover settings: ``home`` first, then every other cluster the topic replicates
        to (their URLs in ``clusters``, so that each switch the driver reports names a cluster)."""
        if not self.cfg.client_failover:
            return {}
        urls = self.target.read_clusters
        order = [home, *(c for c in self.target.replication if c != home)]
        return {"failover": {
            "primary": urls[home], "secondary": [urls[c] for c in order[1:]], "clusters": {urls[c]: c for c in order},
            "failover_delay_ms": self.cfg.failover_delay_ms, "switch_back_delay_ms": self.cfg.switch_back_delay_ms,
            "check_interval_ms": self.cfg.failover_check_ms}}

    def _reader(self, cluster: str, service_url: str, idle_timeout: float) -> DriverProcess:
        config = {"service_url": service_url, "partitions": self.end_positions(cluster), "cluster": cluster,
                  "idle_timeout": idle_timeout, **self.target.driver_auth()}
        return DriverProcess(f"read-{cluster}", "read", self.out, f"read-{cluster}", config,
                             {"cluster": cluster, "run": self.run_id})

    def end_positions(self, cluster: str) -> list[dict[str, str | None]]:
        """Each partition to scan on ``cluster`` with its last message id (``end``), asked of the
        cluster's admin API now, or why that failed (``end_error``)."""
        topics = [f"{self.cfg.topic}-partition-{i}" for i in range(self.cfg.partitions)] or [self.cfg.topic]
        urls = [u for u in self.target.read_admin_urls.get(cluster, "").split(",") if u]
        return [end_position(topic, urls, cluster, self.target.admin_auth) for topic in topics]

    # ----- the run ---------------------------------------------------------------------------
    def end_sending(self, why: str = "asked") -> None:
        """End the send phase now, before ``duration`` (from any thread; once is enough): sends in
        flight still complete, consumers drain and storage is read back as after a full run, and the
        manifest says why it ended early."""
        if self._ending.is_set():
            return
        self.manifest.ended_early = why
        self._ending.set()
        for d in self._producers:
            d.tell("end")

    @contextlib.contextmanager
    def _interrupt_ends_sending(self, progress: Reporter) -> Iterator[None]:
        """While producers send: the first Ctrl-C (SIGINT) ends the send phase gracefully, a second
        one interrupts as usual. Only the main thread can take signals; elsewhere nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)

        def first(signum: int, frame: object) -> None:
            signal.signal(signal.SIGINT, previous)
            progress.note("Ctrl-C: the send phase ends now; consumers drain and storage is read back "
                          "(Ctrl-C again interrupts)")
            self.end_sending("interrupted (Ctrl-C)")

        signal.signal(signal.SIGINT, first)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def run(
        self, tick: Callable[[Counters], None] | None = None, read_idle_timeout: float = 60.0,
        after_send: Callable[[], None] | None = None, progress: Reporter = NO_PROGRESS,
    ) -> WorkloadResult:
        """Consumers subscribe, producers start together and send for ``duration``, ``after_send``
        runs (a wait for replication to catch up, say) while consumers still receive, then consumers
        drain while storage is read back from the earliest position on every cluster. Each phase
        is a step of ``progress``; ``tick`` gets the live counters."""
        self.out.mkdir(parents=True, exist_ok=True)
        self._write_manifest()
        classes = driver_classes(self.dist, progress)
        consumers = [self._consumer(i) for i in range(self.cfg.consumers)]
        producers = self._producers = [self._producer(i) for i in range(self.cfg.producers)]
        t0 = time.monotonic()
        send_seconds = 0.0
        started: list[DriverProcess] = []
        readers: list[DriverProcess] = []
        try:
            with progress.step("drivers", f"{len(consumers)} consumer(s), {len(producers)} producer(s) on {self.cfg.topic}",
                               "starting", "ready"):
                for group in (consumers, producers):  # subscriptions exist before the first send
                    for d in group:
                        d.start(self.dist, classes, self._quick_jit)
                        started.append(d)
                        self._drivers.append(d)
                    self._write_manifest()
                    self._await_ready(group)
            p0 = time.monotonic()
            deadline_ms = time.time_ns() // 1_000_000 + int(self.cfg.duration * 1000)
            with self._interrupt_ends_sending(progress):
                for d in producers:
                    d.tell(f"start {deadline_ms}")
                    if self._ending.is_set():  # ended before this producer started
                        d.tell("end")
                with progress.step("produce", f"producing for {self.cfg.duration:g}s", "sending", "sent"):
                    self._follow(producers, started, tick)
            ends = [d.finished_at for d in producers]
            send_seconds = (max(ends) if all(ends) else time.monotonic()) - p0
            if after_send is not None:  # consumers keep receiving meanwhile: what arrives late is still delivered
                with progress.step("replicated", "waiting for replication to catch up", "waiting", "caught up"):
                    after_send()
            for d in consumers:
                d.tell("drain")
            # storage is read back while the consumers drain: both only read what producing left
            # (the end of each partition is asked now), so neither has to wait for the other
            clusters = self._read_clusters()
            readers = [self._reader(name, url, read_idle_timeout) for name, url in clusters.items()]
            for d in readers:
                d.start(self.dist, classes, self._quick_jit)
                self._drivers.append(d)
            self._write_manifest()
            with progress.step("drain", f"consumers draining, storage read back on {', '.join(clusters)}",
                               "receiving and reading", "drained and read"):
                self._await_ready(readers)
                self._follow([*consumers, *readers], [*started, *readers], tick)
        finally:
            cfg = self.cfg
            self._finish(started, grace=cfg.send_timeout_ms / 1000 + cfg.drain_seconds + cfg.drain_reconnect_seconds + 30)
            self._finish(readers, grace=read_idle_timeout + 60)
        if self._errors:
            (self.out / "errors.txt").write_text("\n".join(self._errors) + "\n")
        self.manifest.ended_ts, self.manifest.finished = time.time_ns(), True
        self._write_manifest()
        rate = self.counters.acked / max(send_seconds, 1e-9)
        failed = [d for d in self.manifest.drivers if d.failed]
        return WorkloadResult(self.out, self.counters, time.monotonic() - t0, rate, list(self._errors), failed, self.run_id,
                              self.manifest.ended_early)

    def _write_manifest(self) -> None:
        self.manifest.drivers = [d.outcome() for d in self._drivers]
        self.manifest.write(self.out)

    def _read_clusters(self) -> dict[str, str]:
        return self.target.read_clusters or {self.target.cluster: self.target.service_url}

    def _await_ready(self, group: list[DriverProcess], timeout: float = READY_TIMEOUT) -> None:
        """Wait until each driver said it is ready (client connected, journal open) or exited."""
        deadline = time.monotonic() + timeout
        for d in group:
            while not d.ready.wait(0.1) and d.alive and time.monotonic() < deadline:
                pass
            if not d.ready.is_set():
                why = f"exited with {d.exitcode}" if not d.alive else f"not ready after {timeout:.0f} s"
                d.fail(why + " before it was ready" if not d.alive else why)
                self._errors.append(f"{d.name}: {why}; log tail:\n{d.log_tail()}")

    def _follow(self, group: list[DriverProcess], every: list[DriverProcess], tick: Callable[[Counters], None] | None) -> None:
        """Until the drivers of ``group`` exit: show the live counters of all of them."""
        while any(d.alive for d in group):
            self._gather(every)
            if tick:
                tick(self.counters)
            time.sleep(0.25)
        self._gather(every)
        if tick:
            tick(self.counters)

    def _finish(self, group: list[DriverProcess], grace: float) -> None:
        """Stop what is still running (killing a stuck driver), record errors, exit codes and
        failures, and turn every journal into its Parquet part."""
        for d in group:
            if d.alive:
                d.tell("stop")
        for d in group:
            if not d.wait(grace):
                self._errors.append(f"{d.name}: did not finish; killed")
                d.fail(f"did not finish within {grace:.0f} s of being told to stop; killed")
                d.kill()
            self._errors.extend(d.errors)
            d.judge_exit()
            if d.exitcode:
                self._errors.append(f"{d.name}: exit code {d.exitcode}; log tail:\n{d.log_tail()}")
            base = self.out / d.part
            if Path(f"{base}.events").exists():
                from pulsarlab.history.journal import journal_to_parquet  # Arrow: loaded once a run has parts

                journal_to_parquet(base)

    def _gather(self, every: list[DriverProcess]) -> None:
        c = self.counters
        c.invoked = sum(d.counts["invoked"] for d in every)
        c.acked = sum(d.counts["acked"] for d in every)
        c.failed = sum(d.counts["failed"] for d in every)
        c.unknown = sum(d.counts["unknown"] for d in every)
        c.received = sum(d.counts["received"] for d in every)
        c.stored = sum(d.counts["stored"] for d in every)


def end_position(topic: str, urls: list[str], cluster: str, auth: ClientAuth | None) -> dict[str, str | None]:
    """``topic``'s last message id from the first of ``urls`` (a cluster's brokers) that answers,
    asked in turn until ``end_position``'s deadline: right after a fault some brokers are down and
    the others busy taking over the topics (one answered nothing within 15 s in CI, after a region
    loss). Failing that, ``end_error`` holds every broker's last error."""
    if not urls:
        return {"topic": topic, "end": None, "end_error": f"no admin URL for cluster {cluster}"}
    deadline = time.monotonic() + timeout("end_position")
    errors: dict[str, str] = {}
    while True:
        for url in urls:
            try:
                return {"topic": topic, "end": AdminClient(url, retries=1, auth=auth).last_message_id(topic),
                        "end_error": None}
            except AdminError as exc:
                errors[url] = str(exc)
        if time.monotonic() >= deadline:
            return {"topic": topic, "end": None, "end_error": "; ".join(errors.values())}
        time.sleep(1.0)
