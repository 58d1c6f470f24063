"""The verifier: a PySpark job over a run's history directory.

Plan (one job, two exchanges of Arrow blobs; history rows are handled as columns, never as rows of
strings):

1. The dimensions (clusters, producers, topics, subscriptions, consumers, which file holds which
   ops) come from the Parquet files' low-cardinality columns on the driver (:mod:`.dims`), not from
   a pass over the history in Spark.
2. Map: tasks read a few row groups each with pyarrow, only the columns their ops need, and turn
   every row into five longs (:mod:`.events`): the message (``producer index << 40 | seq``), a tag
   packing op, cluster, subscription and consumer, and values whose meaning depends on the op.
   Strings become codes through each batch's dictionary; keys and message ids 64-bit hashes
   computed over whole columns. Each task ships its events as one compressed Arrow blob per reduce
   task (a reduce task gets whole blocks of consecutive seqs); Spark's hash exchange on a ``route``
   column delivers it there. Receive and read rows without a producer (unexpected: no send can
   match them) go, as distinct (cluster, topic, message id), to the first reduce task, which counts them.
3. Reduce (:mod:`.aggregate`, :mod:`.checks`): per message, send outcomes and times, bitmasks of the clusters that
   stored / delivered it, per cluster the min and max hash of the stored message ids and the read
   position, per subscription the first/last delivery, first ack and first consumer; then every
   per-message check with counts and first examples, message counts, extremes, latency histograms.
   The stored / delivered (order, seq) pairs go per producer, the ack times per time bucket, to a
   second, small exchange, where each is sorted once: order violations; each bucket's edges and
   two longest gaps.
4. The driver merges the few partial results (examples, exact percentiles, the longest gap).

When the history's producers fall into groups whose rows never share a row group, steps 2 and 3
run in one task per group instead, with no exchange of events (:mod:`.stripes`): each reads its
group's row groups, judges those messages and their order; only the ack times are exchanged.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pulsarlab.errors import PulsarlabError
from pulsarlab.history import SCHEMA
from pulsarlab.history.location import as_uri, local_path
from pulsarlab.history.manifest import VERDICT_FILE
from pulsarlab.progress import NO_PROGRESS, Reporter
from pulsarlab.verify import aggregate, checks, copies, exchange, merge, plan, reading, stripes
from pulsarlab.verify import events as ev
from pulsarlab.verify.dims import MAX_CLUSTERS, base_topic, column_range
from pulsarlab.verify.events import NO_SEQ, Context
from pulsarlab.verify.evidence import replication_targets
from pulsarlab.verify.model import CHECKS, Check, Expectations, Verdict
from pulsarlab.verify.parts import missing_on_executor, unreadable_in
from pulsarlab.verify.plan import BY_CLUSTER_SEP, Plan, unpacked
from pulsarlab.verify.reading import Unit
from pulsarlab.verify.reconcile import Reconciled, reconcile
from pulsarlab.verify.session import SPARK_LOG_NAME, spark_session
from pulsarlab.verify.stripes import Stripe

__all__ = ["MAX_CLUSTERS", "SPARK_SCHEMA", "VERDICT_FILE", "base_topic", "verify"]

ROUTED = "route long, payload binary"
NEEDS = {  # columns each op contributes to the per-message table, besides op, producer and seq
    "send": ("type", "ts", "cluster", "key", "publish_ts", "payload_hash"),
    "receive": ("ts", "cluster", "subscription", "consumer", "key", "publish_ts", "payload_hash"),
    "ack": ("type", "ts", "cluster", "subscription", "publish_ts"),
    "nack": ("publish_ts",),
    "read": ("cluster", "topic", "message_id", "read_index", "publish_ts", "payload_hash"),
    "subscribe": (),
    "scan": (),
}
GAP_BUCKETS = 8
SMALL_BYTES = 4 << 20
"""A history whose parts hold less Parquet than this is judged by one task per stage: what a task
costs to start (a Python worker, the functions unpickled, Arrow streams set up) outweighs what a
second core would share of its work (a scenario's run: 0.7 MB)."""
Strategy = Literal["auto", "exchange", "stripes"]

_ARROW_TO_SPARK = {"string": T.StringType(), "int64": T.LongType(), "int32": T.IntegerType()}
SPARK_SCHEMA = T.StructType([T.StructField(f.name, _ARROW_TO_SPARK[str(f.type)], True) for f in SCHEMA])
_TYPES = {f.name: f.dataType for f in SPARK_SCHEMA.fields}
for _module in (ev, reading, plan, aggregate, checks, exchange, stripes):  # executors need pyarrow, not pulsarlab
    cloudpickle.register_pickle_by_value(_module)


def verify(
    directories: str | Path | Sequence[str | Path],  # paths or file:// URIs
    master: str | None = None,
    expect: Expectations | None = None,
    out: str | Path | None = None,
    *,
    driver_memory: str | None = None,
    executor_python: str | None = None,
    progress: Reporter = NO_PROGRESS,
    strategy: Strategy = "auto",
) -> Verdict:
    """Check one run's history, or several judged as one, and write the verdict (Spark settings:
    :func:`spark_session`; its stages reported to ``progress``).

    A history location is a path or a ``file://`` URI; paths are made absolute here and the
    executors open each part by its ``file://`` URI (see :mod:`pulsarlab.history.location`).

    The verdict goes to ``out`` if given, else to ``verdict.json`` in the one directory (several
    directories and no ``out``: it is only returned). A Spark JVM started here writes its log to
    ``spark.log`` beside the verdict (beside the first directory when there is no verdict file).

    ``strategy``: how a message's events meet (:mod:`.stripes`): "auto" chooses, "exchange" and
    "stripes" force one plan (both give the same verdict; tests and benchmarks compare them).
    """
    started = time.monotonic()
    given = [directories] if isinstance(directories, str | Path) else list(directories)
    dirs = [local_path(d) for d in given]  # absolute: executors run in other working directories
    if not dirs:
        raise ValueError("no history directory given")
    for d in dirs:
        if not d.is_dir():
            raise FileNotFoundError(f"no history directory: {d}")
    target = Path(out) if out is not None else (dirs[0] / VERDICT_FILE if len(dirs) == 1 else None)
    log = (target.parent if target is not None else dirs[0]) / SPARK_LOG_NAME
    # Spark starts while the driver cross-checks the files: the JVM's start and the reading overlap
    with progress.step("spark", f"Spark ({master or 'local[*]'}), its log in {log}", "starting", "ready"), \
            ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
        starting = pool.submit(spark_session, master, driver_memory=driver_memory, executor_python=executor_python,
                               log_file=log)
        with progress.step("dims", "cross-checking the history's files", "reading", "read"):
            history = reconcile(dirs)
            pa.default_memory_pool().release_unused()  # what reading took goes back while Spark works
        spark = starting.result()
    while True:
        job = _Job(spark, dirs, expect or Expectations(), history, strategy)
        how = f"{len(job.tasks)} task(s), each judging whole producers" if job.tasks is not None else "events exchanged"
        with progress.step("checks", f"checking {len(job.paths)} history part(s) of {len(job.d.producers)} producer(s) "
                           f"({how})",
                           "running", "checked"):
            try:
                verdict = job.run()
                break
            except Exception as exc:  # a map task could not read a part: judged again without it
                part = unreadable_in(exc)
                if part is None and (missing := missing_on_executor(exc)) is not None:
                    raise PulsarlabError(missing) from None  # exit 1: the work could not be done
                if part is None or part.path in history.left_out:
                    raise
            history = reconcile(dirs, {**history.left_out, part.path: part.why})
    verdict.seconds = time.monotonic() - started
    if target is not None:
        verdict.write(target)
    return verdict


class _Job:
    def __init__(self, spark: SparkSession, directories: list[Path], expect: Expectations, history: Reconciled,
                 strategy: Strategy = "auto") -> None:
        self.spark = spark
        self.directories = directories
        self.expect = expect
        self.paths, self.d, self.manifests = history.paths, history.dims, history.manifests
        self.evidence, self.notes = history.evidence, history.notes
        lo_hi = self.d.seq_range
        self.one_key = lo_hi is None or (lo_hi[0] >= 0 and lo_hi[1] < NO_SEQ)  # else group by (pidx, seq)
        total = sum(p.stat().st_size for p in self.paths)
        self.small = strategy == "auto" and total < SMALL_BYTES  # a plan asked for keeps its tasks (tests compare them)
        self.cores = cores = 1 if self.small else max(spark.sparkContext.defaultParallelism, 1)
        width = 1 if self.small else 2 * cores  # tasks per stage, at least
        # reduce tasks of the per-message aggregation: several per core, each with some 24 MB of Parquet
        self.reducers = max(width, total // (24 << 20))
        # tasks of the second exchange: each holds the order rows of whole (producer, check) groups,
        # so big histories get up to one task per group (some 128 MB of Parquet each)
        groups = len(self.d.producers) * 2 * max(len(self.d.clusters), len(self.d.subs), 1)
        self.resolvers = max(width, min(groups, total // (128 << 20)))
        self.strategy = strategy
        self.tasks = self.striped()

    # -- per message ----------------------------------------------------------------------------
    def files(self) -> list[tuple[Unit, Any]]:
        """Each part file as a unit without row groups (its URI, the columns its ops need, its one
        op: None when it holds several or the op column is read) and its footer."""
        out = []
        for ops, paths in self.d.files.items():
            for path in paths:
                meta = pq.ParquetFile(path).metadata
                needed = {"producer", "seq"}
                for kind in ops:
                    needed.update(NEEDS.get(kind, _TYPES))
                naming = set()  # what names a delivery without a producer
                if self.d.anonymous and ops & {"receive", "read"}:
                    naming = {"cluster", "topic", "message_id"} - needed
                single = len(ops) == 1 and ops <= NEEDS.keys()
                names = set(meta.schema.to_arrow_schema().names)
                columns = tuple(c for c in _TYPES if c in names and (c in needed | naming or (c == "op" and not single)))
                unit = Unit(as_uri(path), (), columns, next(iter(ops)) if single else None,
                            tuple(c for c in columns if c in naming))
                out.append((unit, meta))
        return out

    def units(self) -> list[Unit]:
        """The map tasks: a few row groups of one file each, reading only the columns its ops need."""
        files = self.files()
        rows = sum(meta.num_rows for _, meta in files)
        target = max(1 << 16, min(1 << 20, rows // (3 * self.cores) + 1))  # several waves per core
        out: list[Unit] = []
        for unit, meta in files:
            group: list[int] = []
            count = 0
            for rg in range(meta.num_row_groups):
                group.append(rg)
                count += meta.row_group(rg).num_rows
                if count >= target or rg == meta.num_row_groups - 1:
                    out.append(replace(unit, row_groups=tuple(group)))
                    group, count = [], 0
        return out

    def striped(self) -> list[Stripe] | None:
        """The tasks of the plan without the big exchange (:mod:`.stripes`), or None when the
        general plan runs: ``strategy`` "exchange", seqs that do not fit one key, or producers
        that do not split into groups keeping the cores evenly busy. ``strategy`` "stripes"
        takes any grouping (one task is enough): tests compare the two plans with it."""
        if self.strategy == "exchange" or not self.one_key:
            if self.strategy == "stripes":
                raise ValueError("the stripes plan needs every seq to fit a message key")
            return None
        files = self.files()
        producers = self.d.producers
        pieces = []
        for f, (_, meta) in enumerate(files):
            names = [meta.schema.column(i).name for i in range(meta.num_columns)]
            at = names.index("producer") if "producer" in names else None
            for rg in range(meta.num_row_groups):
                group = meta.row_group(rg)
                span = stripes.producer_span(group.column(at).statistics, producers) if at is not None else None
                pieces.append(stripes.Piece(f, rg, group.num_rows, span))
        forced = self.strategy == "stripes"
        # local tasks share this machine's memory; a cluster's executors are not known from here
        local = (self.spark.sparkContext.master or "").startswith("local")
        limit = stripes.row_limit(psutil.virtual_memory().available if local else None, self.cores)
        found = stripes.stripes(pieces, [unit for unit, _ in files], 1 if forced else self.cores,
                                1 << 62 if forced else limit, tasks=1 if self.small else None)
        if found is None and forced:
            raise ValueError("the stripes plan needs at least one row group with a producer of the history")
        return found

    def shipped(self, plan: Plan) -> DataFrame:
        """Every event with a producer, in Arrow blobs, each delivered to the reduce task of its messages."""
        ctx = self.context()
        units = self.units()
        routes = exchange.routes(self.reducers)
        ids = self.spark.range(0, max(len(units), 1), 1, numPartitions=max(len(units), 1))
        if not units:
            ids = ids.limit(0)
        blobs = ids.mapInArrow(functools.partial(reading.shipped_units, units, ctx, routes), ROUTED)
        return blobs.repartition(len(routes), "route")

    def context(self) -> Context:
        d = self.d
        return Context(tuple(d.producers), tuple(d.clusters), tuple(d.subs), tuple(d.consumers), self.one_key,
                       d.anonymous)

    def plan(self) -> Plan:
        d = self.d
        index = {p: i for i, p in enumerate(d.producers)}
        scanned = tuple(
            tuple(index[p] for p, s in sorted(d.scopes.items()) if any((c, t) in d.scanned for _, t in s)) for c in d.clusters
        )
        never = tuple(tuple(index[p] for p in d.producers_of(d.sub_topics[j])) for j in range(len(d.subs)))
        targets = replication_targets(self.manifests)
        replicated = tuple(
            tuple(index[p] for p, s in sorted(d.scopes.items())
                  if any(c in targets.get(t, ()) and (c, t) in d.scanned for _, t in s))
            for c in d.clusters
        )
        lo, hi = _send_ts_range(self.d.files)
        return Plan(
            clusters=tuple(d.clusters),
            subs=tuple(d.subs),
            consumers=tuple(d.consumers),
            scanned=scanned,
            never=never,
            one_key=self.one_key,
            routes=exchange.routes(self.resolvers),
            gap_lo=lo,
            gap_width=max((hi - lo) // GAP_BUCKETS + 1, 1),
            gap_buckets=GAP_BUCKETS,
            replicated=replicated,
        )

    # -- all together ---------------------------------------------------------------------------
    def run(self) -> Verdict:
        plan = self.plan()
        if self.tasks is not None:  # each task reads and judges whole producers: no exchange of events
            n = len(self.tasks)
            ctx = self.context()
            ids = self.spark.range(0, n, 1, numPartitions=n)
            routed = ids.mapInArrow(functools.partial(stripes.judge, self.tasks, ctx, plan), ROUTED)
        else:
            routed = self.shipped(plan).mapInArrow(functools.partial(aggregate.reduce_events, plan), ROUTED)
        routed = routed.repartition(len(plan.routes), "route")
        results = routed.mapInArrow(functools.partial(exchange.resolve, plan), ROUTED).collect()
        total = merge.merge([unpacked(r["payload"]) for r in results])
        found = total["found"]
        producers = self.d.producers
        checks_out = []
        for name in CHECKS:
            count, examples = found.get(name, (0, []))
            shown = [{"producer": producers[k[1]] if k[0] else None, "seq": k[3] if k[2] else None, **e} for k, e in examples]
            by_cluster = {k.split(BY_CLUSTER_SEP, 1)[1]: v[0] for k, v in sorted(found.items())
                          if k.startswith(name + BY_CLUSTER_SEP)}
            checks_out.append(Check(name, count, shown, allowed=self.expect.allows(name), by_cluster=by_cluster))
        notes = list(self.notes)
        twice = next(c for c in checks_out if c.name == "duplicated_in_storage")
        if twice.count and (said := copies.name_copies(
                twice.examples, [p for ops, paths in self.d.files.items() if "read" in ops for p in paths])):
            notes.append(said)
        return Verdict(
            [str(d) for d in self.directories],
            checks_out,
            self.metrics(total),
            notes,
            reasons=self.evidence.reasons,
            presence_decisive=not (self.evidence.producer_failed or self.evidence.contradicted),
        )

    @staticmethod
    def metrics(total: dict[str, Any]) -> dict[str, Any]:
        mm = total["minmax"]
        first_ok, last_ok = mm.get("min_ok_ts"), mm.get("max_ok_ts")
        span = (last_ok - first_ok) / 1e9 if first_ok is not None else 0.0
        first_invoke = mm.get("min_invoke_ts")
        gap = merge.longest_gap(total["gaps"], first_invoke, mm["max_last_send_ts"]) if first_invoke is not None else None
        return {
            "messages": {k: total[k] for k in ("sent", "acknowledged", "failed", "info", "indeterminate", "stored", "delivered")},
            "publish_latency_ms": merge.percentiles(total["hist"]["pub"], mm.get("max_pub")),
            "end_to_end_latency_ms": merge.percentiles(total["hist"]["e2e"], mm.get("max_e2e")),
            "replication_delay_ms": merge.replication_delays(total["hist"], mm),
            "throughput_msgs_per_s": round(total["acknowledged"] / span, 3) if span > 0 else None,
            "longest_gap_without_ack_s": gap,
        }


def _send_ts_range(files: dict[frozenset[str], list[str]]) -> tuple[int, int]:
    """(min, max) ``ts`` of the files holding sends (so of every ack), from their Parquet statistics."""
    ranges = [column_range(pq.ParquetFile(path), path, "ts") for ops, paths in files.items() if "send" in ops for path in paths]
    found = [r for r in ranges if r is not None]
    return (min(lo for lo, _ in found), max(hi for _, hi in found)) if found else (0, 0)


