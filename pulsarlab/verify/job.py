"""The verifier: a PySpark job over a run's history directory.

Plan (few shuffles, narrow numeric rows, so 10M messages fit in about a minute on two cores):

1. The dimensions (clusters, producers, topics, subscriptions, consumers, which file holds which
   ops) come from the Parquet files' low-cardinality columns on the driver (:mod:`.dims`), not from
   a pass over the history in Spark.
2. One aggregation groups every event by message into numeric columns only: the message is one
   64-bit key, ``producer index << 40 | seq`` (the index orders like the name). Files are scanned
   per kind (sends, deliveries, reads), each reading only the columns its ops need. Per message:
   send outcomes and times, bitmasks of the clusters that stored / delivered it, per cluster the
   min and max hash of the stored message ids and the read position, per subscription the
   first/last delivery, first ack and first consumer. This table is cached.
3. One global aggregation over it counts every per-message check and computes the metrics
   (percentiles included). Examples are collected only for checks that found something.
4. Order is checked without windows: per (cluster, partition, producer) and per (subscription,
   consumer, key, producer) group, ``collect_list`` gathers (order, seq) packed into one long, which
   ``array_sort`` orders; the descents are found with higher-order functions.
5. The longest gap without an acknowledged send sorts only the ok timestamps, in a few time
   buckets processed in parallel, then combines the buckets' edges on the driver.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsarlab.verify.dims import MAX_CLUSTERS, base_topic, partition_of, read_dims
from pulsarlab.verify.model import CHECKS, MAX_EXAMPLES, Check, Expectations, Verdict
from pulsarlab.verify.session import spark_session
from pulsarlab.workload.history import SCHEMA, part_files, recover_journals

__all__ = ["MAX_CLUSTERS", "SPARK_SCHEMA", "VERDICT_FILE", "base_topic", "verify"]

VERDICT_FILE = "verdict.json"
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
POSITION_BITS = 40  # a stored position is (partition + 1) << 40 | read_index
SEQ_BITS = 40  # a message is producer index << 40 | seq
NO_SEQ = (1 << SEQ_BITS) - 1  # stands for a null seq in a message key
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
NEEDS = {  # columns each op contributes to the per-message table, besides op, producer and seq
    "send": ("type", "ts", "cluster", "key", "publish_ts"),
    "receive": ("ts", "cluster", "subscription", "consumer", "key", "publish_ts"),
    "ack": ("ts", "cluster", "subscription", "publish_ts"),
    "nack": ("publish_ts",),
    "read": ("cluster", "topic", "message_id", "read_index", "publish_ts"),
}
GAP_BUCKETS = 8
MAX_WHEN_CHAIN = 24  # more values than this are mapped through a broadcast join

_ARROW_TO_SPARK = {"string": T.StringType(), "int64": T.LongType(), "int32": T.IntegerType()}
SPARK_SCHEMA = T.StructType([T.StructField(f.name, _ARROW_TO_SPARK[str(f.type)], True) for f in SCHEMA])
_TYPES = {f.name: f.dataType for f in SPARK_SCHEMA.fields}


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


def _bits(n: int) -> int:
    return max(int(n).bit_length(), 1)


class _Job:
    def __init__(self, spark: SparkSession, directory: Path, expect: Expectations) -> None:
        self.spark = spark
        self.directory = directory
        self.expect = expect
        self.notes: list[str] = []
        self.paths = part_files(directory)
        if not self.paths:
            self.notes.append("empty history: no Parquet parts in the directory")
        self.d = read_dims(self.paths)
        lo_hi = self.d.seq_range
        self.one_key = lo_hi is None or (lo_hi[0] >= 0 and lo_hi[1] < NO_SEQ)  # else group by (pidx, seq)
        total = sum(p.stat().st_size for p in self.paths)
        cores = max(spark.sparkContext.defaultParallelism, 1)
        # splits of a few row groups each, several per core: even waves, nothing idle at the end
        spark.conf.set("spark.sql.files.maxPartitionBytes", str(max(4 << 20, min(128 << 20, total // (3 * cores) + 1))))
        # smaller hash maps per reduce task for big histories (AQE merges the small partitions again)
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
        spark.conf.set("spark.sql.shuffle.partitions", str(max(partitions, total // (24 << 20))))
        # every input row goes to the shuffle as is: rows of one message sit in different files, so a
        # map-side hash aggregation merges almost nothing and only costs memory (Spark 4.1+)
        spark.conf.set("spark.sql.execution.bypassPartialAggregation", "true")

    # -- per message ----------------------------------------------------------------------------
    def _scan(self, files: list[str], ops: frozenset[str]) -> DataFrame:
        """The files holding exactly these ops, reading only the columns those ops need."""
        needed = {"producer", "seq"}
        for op in ops:
            needed.update(NEEDS.get(op, _TYPES))
        if len(ops) > 1 or not ops <= NEEDS.keys():
            needed.add("op")
        df = self.spark.read.schema(SPARK_SCHEMA).parquet(*files) if files else self.spark.createDataFrame([], SPARK_SCHEMA)
        cols = [F.col(c) if c in needed else F.lit(None).cast(_TYPES[c]).alias(c) for c in _TYPES if c != "op"]
        op = F.col("op") if "op" in needed else F.lit(next(iter(ops)))
        return df.filter(F.col("producer").isNotNull()).select(op.alias("op"), *cols)

    def _events(self, df: DataFrame) -> DataFrame:
        """Every event as narrow numeric columns keyed by message."""
        d = self.d
        op, kind = F.col("op"), F.col("type")
        code = F.lit(0)  # op and send outcome as one small int, compared cheaply by every aggregate
        for c, (o, k) in enumerate(OP_CODES.values(), start=1):
            code = F.when((op == o) & (kind == k if k else F.lit(True)), F.lit(c)).otherwise(code)
        cid = _index_of("cluster", d.clusters) if len(d.clusters) > 1 else F.lit(0)
        sid = F.lit(None).cast("int")
        for j, (c, sub) in enumerate(d.subs):
            here = (F.coalesce("cluster", F.lit("")) == c) if len(d.clusters) > 1 else F.lit(True)
            sid = F.when(here & (F.coalesce("subscription", F.lit("")) == sub), F.lit(j)).otherwise(sid)
        if len(d.subs) == 1:
            sid = F.lit(0)
        partitioned = [t for t in d.read_topics if partition_of(t)]
        if not partitioned:
            partition = F.lit(0).cast("long")
        elif len(partitioned) <= MAX_WHEN_CHAIN:
            partition = F.lit(0).cast("long")
            for t in partitioned:
                partition = F.when(F.col("topic") == t, F.lit(partition_of(t)).cast("long")).otherwise(partition)
        else:  # casting only strings that are digits: a failed cast is an exception inside Spark, very slow
            suffix = F.substring_index("topic", "-partition-", -1)
            partition = F.when(suffix.rlike("^[0-9]{1,9}$"), suffix.cast("long") + 1).otherwise(F.lit(0))
        if len(d.producers) <= MAX_WHEN_CHAIN:
            df = df.withColumn("pidx", _index_of("producer", d.producers).cast("long"))
        else:
            names = self.spark.createDataFrame(list(enumerate(d.producers)), "pidx long, producer string")
            df = df.join(F.broadcast(names), "producer")
        df = df.withColumns({"opc": code, "cid": cid})
        opc = F.col("opc")
        recv, ack, read, invoke = (opc == OP_CODE[n] for n in ("receive", "ack", "read", "invoke"))
        key = (
            [(F.shiftleft("pidx", SEQ_BITS) + F.coalesce("seq", F.lit(NO_SEQ))).alias("mkey")]
            if self.one_key
            else [F.col("pidx"), F.col("seq")]
        )
        return df.select(
            *key,
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

    def messages(self) -> DataFrame:
        """One row per message, numeric columns only, summarising every event about it.

        A message belongs to one topic (its producer's), so within a message a subscription is
        known by (cluster, name).
        """
        d = self.d
        groups = list(d.files.items()) or [(frozenset(OP_CODES), [])]
        h = None
        for ops, files in groups:
            events = self._events(self._scan(files, ops))
            h = events if h is None else h.unionByName(events)
        assert h is not None
        opc, ts = F.col("opc"), F.col("ts")
        invoke, ok, recv, ack, read = (opc == OP_CODE[n] for n in ("invoke", "ok", "receive", "ack", "read"))
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
        m = h.groupBy("mkey" if self.one_key else ["pidx", "seq"]).agg(*aggs)
        if self.one_key:
            low = F.col("mkey").bitwiseAND(NO_SEQ)
            m = m.withColumns({"pidx": F.shiftright("mkey", SEQ_BITS), "seq": F.when(low != NO_SEQ, low)}).drop("mkey")
        dup = F.lit(0).cast("long")
        for i in range(len(d.clusters)):  # one stored message at two ids: a bit per cluster is all that is kept
            dup = dup.bitwiseOR(F.when(F.col(f"idmin_{i}") != F.col(f"idmax_{i}"), F.lit(1 << i)).otherwise(F.lit(0)))
        return m.withColumn("dup_bits", dup).drop(*[f"id{x}_{i}" for i in range(len(d.clusters)) for x in ("min", "max")])

    def derived(self, m: DataFrame) -> DataFrame:
        """Columns computed from the cached message table on the fly (cheaper than caching them)."""
        d = self.d
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

    def _scanned_expr(self) -> Column:
        """True when the storage view for a message's acknowledging cluster is a read scan."""
        d = self.d
        expr = F.lit(False)
        for i, c in enumerate(d.clusters):
            producers = sorted(p for p, s in d.scopes.items() if any((c, t) in d.scanned for _, t in s))
            if producers:
                expr = expr | ((F.col("ok_cid") == i) & F.col("pidx").isin(self._pidx(producers)))
        return expr

    def _pidx(self, producers: list[str]) -> list[int]:
        index = {p: i for i, p in enumerate(self.d.producers)}
        return [index[p] for p in producers if p in index]

    def message_checks(self) -> list[tuple[str, Column, dict[str, Column]]]:
        """(check, condition, detail) for every check answered per message."""
        d = self.d
        stored_any = (F.col("read_bits") != 0) | (F.col("recv_bits") != 0)
        acked, uncertain = F.col("n_ok") > 0, (F.col("n_info") > 0) & (F.col("n_ok") == 0)
        ok_cluster = _names(d.clusters, F.col("ok_cid"))
        stored_where = F.when(self._scanned_expr(), _has_bit("read_bits", "ok_cid")).otherwise(_has_bit("recv_bits", "ok_cid"))
        out: list[tuple[str, Column, dict[str, Column]]] = [
            ("lost", acked & ~stored_where, {"cluster": ok_cluster, "ok_ts": F.col("ok_ts")}),
            (
                "unexpected",
                (F.col("n_invoke") == 0) & stored_any,
                {"stored_on": _cluster_names(d.clusters, "read_bits"), "delivered_on": _cluster_names(d.clusters, "recv_bits")},
            ),
            ("recovered", uncertain & stored_any, {}),
            ("failed_but_stored", (F.col("n_fail") > 0) & (F.col("n_ok") == 0) & (F.col("n_info") == 0) & stored_any, {}),
        ]
        for i, c in enumerate(d.clusters):
            out.append(("duplicated_in_storage", _has_bit("dup_bits", str(i)), {"cluster": F.lit(c)}))
        for j, (c, sub) in enumerate(d.subs):
            labels = {"cluster": F.lit(c), "subscription": F.lit(sub)}
            producers = d.producers_of(d.sub_topics[j])
            if producers:
                never = (
                    F.col("pidx").isin(self._pidx(producers))
                    & _has_bit("read_bits", str(d.clusters.index(c)))
                    & F.col(f"recv_first_{j}").isNull()
                )
                out.append(("never_delivered", never, labels))
            again = F.col(f"recv_last_{j}") > F.col(f"ack_first_{j}")
            detail = {**labels, "first_ack_ts": F.col(f"ack_first_{j}"), "last_receive_ts": F.col(f"recv_last_{j}")}
            out.append(("duplicated_delivery", again, detail))
        unscanned = sorted({s for scopes in d.scopes.values() for s in scopes} - d.scanned)
        for c, t in unscanned:
            self.notes.append(
                f"no read rows for topic {t!r} on cluster {c!r}: 'lost' uses deliveries as the storage"
                " view there and 'never_delivered'/'duplicated_in_storage' cannot be judged"
            )
        return out

    def anonymous_deliveries(self) -> DataFrame:
        """Stored or delivered messages that carry no producer/seq: unexpected by definition."""
        files = [f for ops, fs in self.d.files.items() if ops & {"receive", "read"} for f in fs]
        rows = self.spark.read.schema(SPARK_SCHEMA).parquet(*files)
        rows = rows.filter(F.col("producer").isNull() & F.col("op").isin("receive", "read"))
        rows = rows.withColumns({"cluster": F.coalesce("cluster", F.lit("")), "topic": F.coalesce("topic", F.lit(""))})
        rows = rows.dropDuplicates(["cluster", "topic", "message_id"]).withColumn("pidx", F.lit(None).cast("long"))
        return _rows(
            rows, "unexpected", F.lit(True), cluster=F.col("cluster"), topic=F.col("topic"), message_id=F.col("message_id")
        )

    # -- order ----------------------------------------------------------------------------------
    def order_violations(self, m: DataFrame, r: Any) -> list[DataFrame]:
        """Both order checks; sorted arrays of packed longs when the values fit, else windows."""
        d = self.d
        seq_bits = _bits((d.seq_range[1] if d.seq_range else 0) + 1)
        seq_mask, room = (1 << seq_bits) - 1, 63 - seq_bits
        branches: list[DataFrame] = []
        slow: list[DataFrame] = []
        seq_code = F.coalesce(F.col("seq"), F.lit(seq_mask))  # a null seq is never compared, as with lag()
        for i, c in enumerate(d.clusters):
            pos, part = f"read_index_{i}", f"read_partition_{i}"
            if r[f"max_ri_{i}"] is None:
                continue
            if r[f"max_ri_{i}"] < (1 << room):
                packed = F.shiftleft(pos, seq_bits) + seq_code
                branches.append(_order_rows(m, pos, 0, i, F.col(part), F.lit(0).cast("long"), packed))
            else:
                slow.append(self._producer_order(m, i, c))
        for j, (c, sub) in enumerate(d.subs):
            lo, hi = r[f"min_first_{j}"], r[f"max_first_{j}"]
            labels = {"cluster": F.lit(c), "subscription": F.lit(sub)}
            if lo is None:
                continue
            if hi - lo < (1 << room):
                first = f"recv_first_{j}"
                packed = F.shiftleft(F.col(first) - lo, seq_bits) + seq_code
                branches.append(_order_rows(m, first, 1, j, F.col(f"consumer_{j}").cast("long"), F.col("key_hash"), packed))
            else:
                slow.append(self._key_order(m, j, labels, d.consumers))
        if branches:
            slow.append(self._packed_order(branches, seq_bits, r))
        return slow

    def _packed_order(self, branches: list[DataFrame], seq_bits: int, r: Any) -> DataFrame:
        d = self.d
        rows = branches[0]
        for b in branches[1:]:
            rows = rows.unionByName(b)
        mask = (1 << seq_bits) - 1
        seq_of = lambda x: x.bitwiseAND(mask)  # noqa: E731
        groups = rows.groupBy("kind", "idx", "pidx", "a", "b").agg(F.sort_array(F.collect_list("packed")).alias("v"))
        n = F.size("v")

        def backwards(i: Column) -> Column:
            cur, prev = seq_of(F.element_at("v", i)), seq_of(F.element_at("v", i - 1))
            return (cur < prev) & (cur != mask) & (prev != mask)

        at = F.filter(F.sequence(F.lit(2), F.greatest(n, F.lit(2))), lambda i: (n >= 2) & backwards(i))
        pairs = F.transform(at, lambda i: F.struct(F.element_at("v", i).alias("cur"), F.element_at("v", i - 1).alias("prev")))
        bad = groups.select("kind", "idx", "pidx", "a", F.explode(pairs).alias("p"))
        cur, prev = F.col("p.cur"), F.col("p.prev")
        order = F.shiftright(cur, seq_bits)
        seq, prev_seq = seq_of(cur), seq_of(prev)
        detail = F.lit(None).cast("string")
        kind, idx = F.col("kind"), F.col("idx")
        for i, c in enumerate(d.clusters):
            body = F.struct(
                F.lit(c).alias("cluster"), F.col("a").alias("partition"), prev_seq.alias("prev_seq"), order.alias("read_index")
            )
            detail = F.when((kind == 0) & (idx == i), F.to_json(body)).otherwise(detail)
        for j, (c, sub) in enumerate(d.subs):
            if r[f"min_first_{j}"] is None:
                continue
            body = F.struct(
                F.lit(c).alias("cluster"),
                F.lit(sub).alias("subscription"),
                _names(d.consumers, F.col("a").cast("int")).alias("consumer"),
                prev_seq.alias("prev_seq"),
                (order + F.lit(r[f"min_first_{j}"])).alias("first_receive_ts"),
            )
            detail = F.when((kind == 1) & (idx == j), F.to_json(body)).otherwise(detail)
        check = F.when(kind == 0, F.lit("order_violations_producer")).otherwise(F.lit("order_violations_key"))
        return bad.select(check.alias("check"), "pidx", seq.alias("seq"), detail.alias("detail"))

    @staticmethod
    def _producer_order(m: DataFrame, i: int, cluster: str) -> DataFrame:
        """Stored order on one cluster: per (producer, topic partition) seq must rise with read_index."""
        pos, part = f"read_index_{i}", f"read_partition_{i}"
        w = Window.partitionBy("pidx", part).orderBy(pos)
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
        w = Window.partitionBy("pidx", consumer, "key_hash").orderBy(first, "seq")
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
    def summary(self, m: DataFrame, checks: list[tuple[str, Column, dict[str, Column]]]) -> Any:
        """One pass over the message table: every metric, every per-message check's count, and the
        ranges the order checks pack into longs."""
        d = self.d
        acked = F.col("n_ok") > 0
        pub = F.when(acked, (F.col("ok_ts") - F.col("invoke_ts")) / 1e6)
        e2e = (F.col("first_recv_ts") - F.coalesce("publish_ts", "invoke_ts")) / 1e6
        uncertain = (F.col("n_info") > 0) & (F.col("n_ok") == 0)
        stored_any = (F.col("read_bits") != 0) | (F.col("recv_bits") != 0)
        ranges = [F.max(f"read_index_{i}").alias(f"max_ri_{i}") for i in range(len(d.clusters))]
        for j in range(len(d.subs)):
            ranges += [F.min(f"recv_first_{j}").alias(f"min_first_{j}"), F.max(f"recv_first_{j}").alias(f"max_first_{j}")]
        return m.agg(
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
            *ranges,
            *[F.count_if(cond).alias(f"check_{k}") for k, (_, cond, _) in enumerate(checks)],
        ).first()

    def metrics(self, m: DataFrame, r: Any) -> dict[str, Any]:
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
        counts too. The ok times are cut into a few time buckets sorted in parallel; a gap either
        lies inside one bucket or runs from one non-empty bucket's last point to the next one's first.
        """
        if first_invoke is None:
            return None
        oks = m.filter(F.col("ok_ts").isNotNull()).select(F.col("ok_ts").alias("t"))
        bounds = self.spark.createDataFrame([(first_invoke,), (last_send,)], "t long")
        width = max((last_send - first_invoke) // GAP_BUCKETS + 1, 1)
        bucket = F.least(F.greatest(F.floor((F.col("t") - F.lit(first_invoke)) / F.lit(width)), F.lit(0)), F.lit(GAP_BUCKETS - 1))
        points = oks.unionByName(bounds).withColumn("b", bucket.cast("int"))
        w = Window.partitionBy("b").orderBy("t")
        gaps = points.withColumn("prev", F.lag("t").over(w))
        rows = gaps.groupBy("b").agg(
            F.min("t").alias("lo"),
            F.max("t").alias("hi"),
            F.max_by(F.struct("prev", "t"), F.struct(F.col("t") - F.col("prev"), -F.col("prev"))).alias("g"),
        )
        best: tuple[int, int, int] | None = None  # (gap, -from, to): the longest, then the earliest
        last_hi = None
        for row in sorted(rows.collect(), key=lambda r: r["b"]):
            candidates = [(row["lo"], last_hi)] if last_hi is not None else []
            if row["g"] is not None and row["g"]["prev"] is not None:
                candidates.append((row["g"]["t"], row["g"]["prev"]))
            for t, prev in candidates:
                key = (t - prev, -prev, t)
                best = key if best is None or key > best else best
            last_hi = row["hi"]
        if best is None:
            return {"seconds": 0.0, "from_ts": first_invoke, "to_ts": first_invoke}
        return {"seconds": best[0] / 1e9, "from_ts": -best[1], "to_ts": best[2]}

    # -- all together ---------------------------------------------------------------------------
    def run(self) -> Verdict:
        cached = self.messages().persist(StorageLevel.MEMORY_AND_DISK)
        m = self.derived(cached)
        try:
            checks = self.message_checks()
            r = self.summary(m, checks)
            parts = [_rows(m, name, cond, **detail) for k, (name, cond, detail) in enumerate(checks) if r[f"check_{k}"]]
            parts += self.order_violations(m, r)
            if self.d.anonymous:
                parts.append(self.anonymous_deliveries())
            found = _collect_examples(parts, self.d.producers) if parts else {}
            metrics = self.metrics(m, r)
        finally:
            cached.unpersist()
        checks_out = []
        for name in CHECKS:
            count, examples = found.get(name, (0, []))
            checks_out.append(Check(name, count, examples, allowed=self.expect.allows(name)))
        return Verdict(str(self.directory), checks_out, metrics, self.notes)


def _order_rows(m: DataFrame, present: str, kind: int, idx: int, a: Column, b: Column, packed: Column) -> DataFrame:
    """Rows for the packed order check: group (kind, idx, pidx, a, b), one packed (order, seq) long."""
    return m.filter(F.col(present).isNotNull()).select(
        F.lit(kind).alias("kind"), F.lit(idx).alias("idx"), "pidx", a.alias("a"), b.alias("b"), packed.alias("packed")
    )


def _rows(df: DataFrame, check: str, condition: Column, **detail: Column) -> DataFrame:
    """Anomaly rows in the one shape every check shares."""
    payload = F.to_json(F.struct(*[c.alias(k) for k, c in detail.items()])) if detail else F.lit("{}")
    return df.filter(condition).select(F.lit(check).alias("check"), F.col("pidx"), F.col("seq"), payload.alias("detail"))


def _collect_examples(parts: list[DataFrame], producers: list[str]) -> dict[str, tuple[int, list[dict[str, Any]]]]:
    """Count every check and keep its first examples, in one Spark job."""
    allrows = parts[0]
    for p in parts[1:]:
        allrows = allrows.unionByName(p)
    by_check = Window.partitionBy("check")
    ranked = (
        allrows.withColumn("n", F.count(F.lit(1)).over(by_check))
        .withColumn("rn", F.row_number().over(by_check.orderBy("pidx", "seq", "detail")))
        .filter(F.col("rn") <= MAX_EXAMPLES)
        .collect()
    )
    found: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for r in sorted(ranked, key=lambda r: (r["check"], r["rn"])):
        count, examples = found.setdefault(r["check"], (r["n"], []))
        producer = producers[r["pidx"]] if r["pidx"] is not None else None
        examples.append({"producer": producer, "seq": r["seq"], **json.loads(r["detail"])})
    return found


def _percentiles(values: list[float] | None, maximum: float | None) -> dict[str, float | None]:
    names = ("p50", "p95", "p99", "p99_9")
    out: dict[str, float | None] = dict.fromkeys(names)
    if values:
        out.update({n: round(v, 3) for n, v in zip(names, values, strict=True)})
    out["max"] = round(maximum, 3) if maximum is not None else None
    return out
