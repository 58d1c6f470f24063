"""The verifier: a PySpark job over a run's history directory.

Plan (kept to few shuffles so 10M messages fit in a minute on two cores):

1. A small ``distinct`` over the history yields the dimensions: clusters, which producer sends to
   which (cluster, topic), which (cluster, topic) a reader scanned, and the subscriptions.
2. One aggregation groups every event by message, ``(producer, seq)``, into numeric columns only
   (so Spark keeps a fast hash aggregation): send outcomes and times, bitmasks of the clusters
   that stored / delivered it, per cluster the min and max hash of the stored message ids and the
   read position, per subscription the first/last delivery, first ack and first consumer. This
   table is cached; every check and metric is a filter, aggregate or window over it.
3. Order is checked with windows over that table: stored order per (cluster, partition, producer)
   by ``read_index``; first-delivery order per (subscription, consumer, key, producer) by time.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsarlab.verify.model import CHECKS, MAX_EXAMPLES, Check, Expectations, Verdict
from pulsarlab.verify.session import spark_session
from pulsarlab.workload.history import SCHEMA, part_files, recover_journals

VERDICT_FILE = "verdict.json"
PARTITION_SUFFIX = r"-partition-[0-9]+$"
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
MAX_CLUSTERS = 62
POSITION_BITS = 40  # a stored position is (partition + 1) << 40 | read_index
OP_CODES = {
    "invoke": ("send", "invoke"),
    "ok": ("send", "ok"),
    "info": ("send", "info"),
    "fail": ("send", "fail"),
    "receive": ("receive", None),
    "ack": ("ack", None),
    "nack": ("nack", None),
    "read": ("read", None),
}
OP_CODE = {name: code for code, name in enumerate(OP_CODES, start=1)}  # cluster sets are bitmasks in a signed 64-bit column

_ARROW_TO_SPARK = {"string": T.StringType(), "int64": T.LongType(), "int32": T.IntegerType()}
SPARK_SCHEMA = T.StructType([T.StructField(f.name, _ARROW_TO_SPARK[str(f.type)], True) for f in SCHEMA])


def verify(directory: str | Path, master: str | None = None, expect: Expectations | None = None) -> Verdict:
    """Check a run's history and write ``verdict.json`` next to it."""
    started = time.monotonic()
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no history directory: {directory}")
    recover_journals(directory)
    spark = spark_session(master)
    verdict = _Job(spark, directory, expect or Expectations()).run()
    verdict.seconds = time.monotonic() - started
    verdict.write(directory / VERDICT_FILE)
    return verdict


@dataclass
class _Dims:
    """The small facts every big expression is built from."""

    clusters: list[str]
    scopes: dict[str, set[tuple[str, str]]]  # producer -> {(cluster, base topic)} it sent through
    scanned: set[tuple[str, str]]  # (cluster, base topic) that have read rows
    subs: list[tuple[str, str]]  # (cluster, subscription); the index is the sub id
    sub_topics: dict[int, set[str]]  # sub id -> base topics it was seen on
    consumers: list[str]

    def producers_of(self, topics: set[str]) -> list[str]:
        return sorted(p for p, s in self.scopes.items() if any(t in topics for _, t in s))


def base_topic(topic: str) -> str:
    """``persistent://t/n/x-partition-3`` -> ``persistent://t/n/x``."""
    return re.sub(PARTITION_SUFFIX, "", topic)


def _index_of(column: str, values: list[str]) -> Column:
    """The position of a string column's value in ``values`` (few values), else null."""
    expr = F.lit(None).cast("int")
    for i, v in enumerate(values):
        expr = F.when(F.col(column) == v, F.lit(i)).otherwise(expr)
    return expr


def _names(values: list[str], index: Column) -> Column:
    """Map a small integer column back to the names it stands for."""
    return F.element_at(F.array(*[F.lit(v) for v in values]), index + 1)


def _cluster_names(clusters: list[str], bits: str) -> Column:
    """The names of the clusters whose bit is set in a bitmask column."""
    return F.array_compact(F.array(*[F.when(_has_bit(bits, str(i)), F.lit(c)) for i, c in enumerate(clusters)]))


def _has_bit(bits: str, index: str) -> Column:
    return F.expr(f"coalesce(shiftright({bits}, {index}) & 1, 0) = 1")


class _Job:
    def __init__(self, spark: SparkSession, directory: Path, expect: Expectations) -> None:
        self.spark = spark
        self.directory = directory
        self.expect = expect
        self.notes: list[str] = []
        paths = [str(p) for p in part_files(directory)]
        if paths:
            self.hist = spark.read.schema(SPARK_SCHEMA).parquet(*paths)
        else:
            self.hist = spark.createDataFrame([], SPARK_SCHEMA)
            self.notes.append("empty history: no Parquet parts in the directory")
        self.hist = self.hist.withColumns(
            {
                "cluster": F.coalesce("cluster", F.lit("")),
                "topic": F.coalesce("topic", F.lit("")),
                "subscription": F.coalesce("subscription", F.lit("")),
            }
        )

    # -- dimensions -----------------------------------------------------------------------------
    def dims(self) -> _Dims:
        op = F.col("op")
        delivery = op.isin("receive", "ack")
        rows = (
            self.hist.select(
                "op",
                F.when(op == "send", F.col("producer")).alias("producer"),
                "cluster",
                "topic",
                F.when(delivery, F.col("subscription")).alias("sub"),
                F.when(op == "receive", F.col("consumer")).alias("consumer"),
            )
            .distinct()
            .collect()
        )
        clusters = sorted({r["cluster"] for r in rows})
        if len(clusters) > MAX_CLUSTERS:
            raise ValueError(f"{len(clusters)} clusters in one history; at most {MAX_CLUSTERS} are supported")
        scopes: dict[str, set[tuple[str, str]]] = {}
        scanned: set[tuple[str, str]] = set()
        sub_topics: dict[tuple[str, str], set[str]] = {}
        for r in rows:
            scope = (r["cluster"], base_topic(r["topic"]))
            if r["op"] == "send" and r["producer"] is not None:
                scopes.setdefault(r["producer"], set()).add(scope)
            elif r["op"] == "read":
                scanned.add(scope)
            elif r["sub"] is not None:
                sub_topics.setdefault((r["cluster"], r["sub"]), set()).add(scope[1])
        subs = sorted(sub_topics)
        consumers = sorted({r["consumer"] for r in rows if r["consumer"] is not None})
        return _Dims(clusters, scopes, scanned, subs, {j: sub_topics[s] for j, s in enumerate(subs)}, consumers)

    # -- per message ----------------------------------------------------------------------------
    def messages(self, d: _Dims) -> DataFrame:
        """One row per (producer, seq), numeric columns only, summarising every event about it.

        A message belongs to one topic (its producer's), so within a message a subscription is
        known by (cluster, name).
        """
        op, kind = F.col("op"), F.col("type")
        code = F.lit(0)  # op and send outcome as one small int, compared cheaply by every aggregate
        for c, (o, k) in enumerate(OP_CODES.values(), start=1):
            code = F.when((op == o) & (kind == k if k else F.lit(True)), F.lit(c)).otherwise(code)
        h = self.hist.filter(F.col("producer").isNotNull())
        h = h.withColumns({"opc": code, "cid": _index_of("cluster", d.clusters) if len(d.clusters) > 1 else F.lit(0)})
        sid = F.lit(None).cast("int")
        for j, (c, sub) in enumerate(d.subs):
            sid = F.when((F.col("cid") == d.clusters.index(c)) & (F.col("subscription") == sub), F.lit(j)).otherwise(sid)
        # casting only strings that are digits: a failed cast is an exception inside Spark, very slow
        suffix = F.substring_index("topic", "-partition-", -1)
        partition = F.when(suffix.rlike("^[0-9]{1,9}$"), suffix.cast("long") + 1).otherwise(F.lit(0))
        opc, ts = F.col("opc"), F.col("ts")
        invoke, ok, info, fail, recv, ack, read = (
            opc == OP_CODE[n] for n in ("invoke", "ok", "info", "fail", "receive", "ack", "read")
        )
        h = h.select(
            "producer",
            "seq",
            "ts",
            "publish_ts",
            "opc",
            "cid",
            F.when(recv | ack, sid).alias("sid"),
            F.when(recv, _index_of("consumer", d.consumers)).alias("consumer_id"),
            F.when(invoke | recv, F.xxhash64("key")).alias("key_hash"),  # null keys: one "no key" group
            F.when(read, F.xxhash64("message_id")).alias("id_hash"),
            F.when(read, F.shiftleft(partition, POSITION_BITS) + F.col("read_index")).alias("position"),
        )
        send = (opc >= OP_CODE["invoke"]) & (opc <= OP_CODE["fail"])
        bit = F.expr("shiftleft(1L, cid)")
        flag = F.expr("shiftleft(1, opc)")
        aggs = [
            F.bit_or(F.when(send, flag)).alias("kinds"),
            F.min(F.when(invoke, ts)).alias("invoke_ts"),
            F.min(F.when(ok, ts)).alias("ok_ts"),
            F.max(F.when(send, ts)).alias("last_send_ts"),
            F.max(F.when(ok, F.col("cid"))).alias("ok_cid"),
            F.max("publish_ts").alias("publish_ts"),
            F.coalesce(F.bit_or(F.when(read, bit)), F.lit(0).cast("long")).alias("read_bits"),
            F.coalesce(F.bit_or(F.when(recv, bit)), F.lit(0).cast("long")).alias("recv_bits"),
            F.max("key_hash").alias("key_hash"),
        ]
        for i in range(len(d.clusters)):
            here = F.col("cid") == i
            aggs += [
                F.min(F.when(here, F.col("id_hash"))).alias(f"idmin_{i}"),
                F.max(F.when(here, F.col("id_hash"))).alias(f"idmax_{i}"),
                F.min(F.when(here, F.col("position"))).alias(f"position_{i}"),
            ]
        for j in range(len(d.subs)):
            mine = F.col("sid") == j
            aggs += [
                F.min(F.when(recv & mine, ts)).alias(f"recv_first_{j}"),
                F.max(F.when(recv & mine, ts)).alias(f"recv_last_{j}"),
                F.min(F.when(ack & mine, ts)).alias(f"ack_first_{j}"),
                F.min_by(F.when(recv & mine, F.col("consumer_id")), F.when(recv & mine, ts)).alias(f"consumer_{j}"),
            ]
        m = h.groupBy("producer", "seq").agg(*aggs)
        kinds = F.coalesce(F.col("kinds"), F.lit(0))
        derived = {f"n_{n}": F.shiftright(kinds, OP_CODE[n]).bitwiseAND(1) for n in ("invoke", "ok", "info", "fail")}
        derived["first_recv_ts"] = (
            F.least(*[F.col(f"recv_first_{j}") for j in range(len(d.subs))])
            if len(d.subs) > 1
            else F.col("recv_first_0")
            if d.subs
            else F.lit(None).cast("long")
        )
        for i in range(len(d.clusters)):
            pos = F.col(f"position_{i}")
            derived[f"read_index_{i}"] = pos.bitwiseAND((1 << POSITION_BITS) - 1)
            derived[f"read_partition_{i}"] = F.shiftright(pos, POSITION_BITS) - 1
        return m.withColumns(derived)

    def _scanned_expr(self, d: _Dims) -> Column:
        """True when the storage view for a message's acknowledging cluster is a read scan."""
        expr = F.lit(False)
        for i, c in enumerate(d.clusters):
            producers = sorted(p for p, s in d.scopes.items() if any((c, t) in d.scanned for _, t in s))
            if producers:
                expr = expr | ((F.col("ok_cid") == i) & F.col("producer").isin(producers))
        return expr

    def message_anomalies(self, m: DataFrame, d: _Dims) -> list[DataFrame]:
        """(check, producer, seq, detail) rows for the checks answered per message."""
        stored_any = (F.col("read_bits") != 0) | (F.col("recv_bits") != 0)
        acked, uncertain = F.col("n_ok") > 0, (F.col("n_info") > 0) & (F.col("n_ok") == 0)
        ok_cluster = _names(d.clusters, F.col("ok_cid"))
        stored_where = F.when(self._scanned_expr(d), _has_bit("read_bits", "ok_cid")).otherwise(_has_bit("recv_bits", "ok_cid"))
        out = [
            _rows(m, "lost", acked & ~stored_where, cluster=ok_cluster, ok_ts=F.col("ok_ts")),
            _rows(
                m,
                "unexpected",
                (F.col("n_invoke") == 0) & stored_any,
                stored_on=_cluster_names(d.clusters, "read_bits"),
                delivered_on=_cluster_names(d.clusters, "recv_bits"),
            ),
            _rows(m, "recovered", uncertain & stored_any),
            _rows(
                m,
                "failed_but_stored",
                (F.col("n_fail") > 0) & (F.col("n_ok") == 0) & (F.col("n_info") == 0) & stored_any,
            ),
        ]
        for i, c in enumerate(d.clusters):
            dup = F.col(f"idmin_{i}") != F.col(f"idmax_{i}")
            out.append(_rows(m, "duplicated_in_storage", dup, cluster=F.lit(c)))
            out.append(self._producer_order(m, i, c))
        for j, (c, sub) in enumerate(d.subs):
            labels = {"cluster": F.lit(c), "subscription": F.lit(sub)}
            producers = d.producers_of(d.sub_topics[j])
            if producers:
                never = (
                    F.col("producer").isin(producers)
                    & _has_bit("read_bits", str(d.clusters.index(c)))
                    & F.col(f"recv_first_{j}").isNull()
                )
                out.append(_rows(m, "never_delivered", never, **labels))
            again = F.col(f"recv_last_{j}") > F.col(f"ack_first_{j}")
            out.append(
                _rows(
                    m,
                    "duplicated_delivery",
                    again,
                    **labels,
                    first_ack_ts=F.col(f"ack_first_{j}"),
                    last_receive_ts=F.col(f"recv_last_{j}"),
                )
            )
            out.append(self._key_order(m, j, labels, d.consumers))
        unscanned = sorted({s for scopes in d.scopes.values() for s in scopes} - d.scanned)
        for c, t in unscanned:
            self.notes.append(
                f"no read rows for topic {t!r} on cluster {c!r}: 'lost' uses deliveries as the storage"
                " view there and 'never_delivered'/'duplicated_in_storage' cannot be judged"
            )
        return out

    def anonymous_deliveries(self) -> DataFrame:
        """Stored or delivered messages that carry no producer/seq: unexpected by definition."""
        rows = self.hist.filter(F.col("producer").isNull() & F.col("op").isin("receive", "read"))
        rows = rows.dropDuplicates(["cluster", "topic", "message_id"])
        return _rows(
            rows,
            "unexpected",
            F.lit(True),
            cluster=F.col("cluster"),
            topic=F.col("topic"),
            message_id=F.col("message_id"),
        )

    # -- order ----------------------------------------------------------------------------------
    @staticmethod
    def _producer_order(m: DataFrame, i: int, cluster: str) -> DataFrame:
        """Stored order on one cluster: per (producer, topic partition) seq must rise with read_index."""
        pos, part = f"read_index_{i}", f"read_partition_{i}"
        w = Window.partitionBy("producer", part).orderBy(pos)
        stored = m.filter(F.col(pos).isNotNull()).withColumn("prev_seq", F.lag("seq").over(w))
        return _rows(
            stored,
            "order_violations_producer",
            F.col("prev_seq") > F.col("seq"),
            cluster=F.lit(cluster),
            partition=F.col(part),
            prev_seq=F.col("prev_seq"),
            read_index=F.col(pos),
        )

    @staticmethod
    def _key_order(m: DataFrame, j: int, labels: dict[str, Column], consumers: list[str]) -> DataFrame:
        """First deliveries to one subscription, per (consumer, key, producer), must rise in seq."""
        first, consumer = f"recv_first_{j}", f"consumer_{j}"
        w = Window.partitionBy("producer", consumer, "key_hash").orderBy(first, "seq")
        got = m.filter(F.col(first).isNotNull()).withColumn("prev_seq", F.lag("seq").over(w))
        return _rows(
            got,
            "order_violations_key",
            F.col("prev_seq") > F.col("seq"),
            **labels,
            consumer=_names(consumers, F.col(consumer)),
            prev_seq=F.col("prev_seq"),
            first_receive_ts=F.col(first),
        )

    # -- metrics --------------------------------------------------------------------------------
    def metrics(self, m: DataFrame) -> dict[str, Any]:
        acked = F.col("n_ok") > 0
        pub = F.when(acked, (F.col("ok_ts") - F.col("invoke_ts")) / 1e6)
        e2e = (F.col("first_recv_ts") - F.coalesce("publish_ts", "invoke_ts")) / 1e6
        uncertain = (F.col("n_info") > 0) & (F.col("n_ok") == 0)
        stored_any = (F.col("read_bits") != 0) | (F.col("recv_bits") != 0)
        r = m.agg(
            F.percentile_approx(pub, list(PERCENTILES), 10_000).alias("pub_p"),
            F.max(pub).alias("pub_max"),
            F.percentile_approx(e2e, list(PERCENTILES), 10_000).alias("e2e_p"),
            F.max(e2e).alias("e2e_max"),
            F.count_if(F.col("n_invoke") > 0).alias("sent"),
            F.count_if(acked).alias("acknowledged"),
            F.count_if((F.col("n_fail") > 0) & (F.col("n_ok") == 0) & (F.col("n_info") == 0)).alias("failed"),
            F.count_if(uncertain).alias("info"),
            F.count_if(uncertain & ~stored_any).alias("indeterminate"),
            F.count_if(F.col("read_bits") != 0).alias("stored"),
            F.count_if(F.col("recv_bits") != 0).alias("delivered"),
            F.min("ok_ts").alias("first_ok"),
            F.max("ok_ts").alias("last_ok"),
            F.min("invoke_ts").alias("first_invoke"),
            F.max("last_send_ts").alias("last_send"),
        ).first()
        span = (r["last_ok"] - r["first_ok"]) / 1e9 if r["first_ok"] is not None else 0.0
        counted = ("sent", "acknowledged", "failed", "info", "indeterminate", "stored", "delivered")
        return {
            "messages": {k: r[k] for k in counted},
            "publish_latency_ms": _percentiles(r["pub_p"], r["pub_max"]),
            "end_to_end_latency_ms": _percentiles(r["e2e_p"], r["e2e_max"]),
            "throughput_msgs_per_s": round(r["acknowledged"] / span, 3) if span > 0 else None,
            "longest_gap_without_ack_s": self.longest_gap(m, r["first_invoke"], r["last_send"]),
        }

    def longest_gap(self, m: DataFrame, first_invoke: int | None, last_send: int | None) -> dict[str, Any] | None:
        """Longest interval of the send phase with no acknowledged send (an RTO figure).

        The phase runs from the first invoke to the last send event, so an outage at either end
        counts too.
        """
        if first_invoke is None:
            return None
        oks = m.filter(F.col("ok_ts").isNotNull()).select(F.col("ok_ts").alias("t"))
        bounds = self.spark.createDataFrame([(first_invoke,), (last_send,)], "t long")
        w = Window.orderBy("t")
        gaps = oks.unionByName(bounds).withColumn("prev", F.lag("t").over(w)).filter(F.col("prev").isNotNull())
        row = gaps.agg(F.max_by(F.struct("prev", "t"), F.col("t") - F.col("prev")).alias("g")).first()["g"]
        if row is None:
            return {"seconds": 0.0, "from_ts": first_invoke, "to_ts": first_invoke}
        return {"seconds": (row["t"] - row["prev"]) / 1e9, "from_ts": row["prev"], "to_ts": row["t"]}

    # -- all together ---------------------------------------------------------------------------
    def run(self) -> Verdict:
        d = self.dims()
        m = self.messages(d).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            found = _collect_examples([*self.message_anomalies(m, d), self.anonymous_deliveries()])
            metrics = self.metrics(m)
        finally:
            m.unpersist()
        checks = []
        for name in CHECKS:
            count, examples = found.get(name, (0, []))
            checks.append(Check(name, count, examples, allowed=self.expect.allows(name)))
        return Verdict(str(self.directory), checks, metrics, self.notes)


def _rows(df: DataFrame, check: str, condition: Column, **detail: Column) -> DataFrame:
    """Anomaly rows in the one shape every check shares."""
    payload = F.to_json(F.struct(*[c.alias(k) for k, c in detail.items()])) if detail else F.lit("{}")
    return df.filter(condition).select(F.lit(check).alias("check"), F.col("producer"), F.col("seq"), payload.alias("detail"))


def _collect_examples(parts: list[DataFrame]) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """Count every check and keep its first examples, in one Spark job."""
    allrows = parts[0]
    for p in parts[1:]:
        allrows = allrows.unionByName(p)
    by_check = Window.partitionBy("check")
    ranked = (
        allrows.withColumn("n", F.count(F.lit(1)).over(by_check))
        .withColumn("rn", F.row_number().over(by_check.orderBy("producer", "seq", "detail")))
        .filter(F.col("rn") <= MAX_EXAMPLES)
        .collect()
    )
    found: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for r in sorted(ranked, key=lambda r: (r["check"], r["rn"])):
        count, examples = found.setdefault(r["check"], (r["n"], []))
        examples.append({"producer": r["producer"], "seq": r["seq"], **json.loads(r["detail"])})
    return found


def _percentiles(values: list[float] | None, maximum: float | None) -> dict[str, float | None]:
    names = ("p50", "p95", "p99", "p99_9")
    out: dict[str, float | None] = dict.fromkeys(names)
    if values:
        out.update({n: round(v, 3) for n, v in zip(names, values, strict=True)})
    out["max"] = round(maximum, 3) if maximum is not None else None
    return out
