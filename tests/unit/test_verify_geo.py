"""The verifier on hand-made two-cluster histories: replication delay percentiles per destination,
and a replica's storage judged exactly (a dropped copy, a copy stored twice)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pulsarlab.verify import Verdict, verify
from tests.unit.test_verify import MS, SUB, TOPIC, Row, clean_history, nonzero, run, scan_row, write_parts

ID_PREFIX = {"c1": "7", "c2": "8"}


def replicated(
    tmp_path: Path,
    n: int,
    delays: dict[str, Callable[[int], float]],
    acked_on: Callable[[str], str] = lambda producer: "c1",
    drop: dict[str, set[int]] | None = None,
    twice: dict[str, int] | None = None,
) -> Verdict:
    """``n`` messages (message k is seq k // 2 of producer p{k % 2}), each acknowledged on
    ``acked_on(producer)``, stored on c1 and c2 under each cluster's own ids, and received by a
    subscription on every cluster of ``delays``, ``delays[cluster](k)`` ms after its ack.
    ``drop``: per cluster, the messages missing from its storage; ``twice``: per cluster, one
    message stored there at a second id."""
    parts = clean_history(n)
    oks: dict[tuple[str, int], int] = {}
    for name, rows in parts.items():
        if name.startswith("producer-"):
            for r in rows:
                r["cluster"] = acked_on(r["producer"])
                if r["type"] == "ok":
                    oks[r["producer"], r["seq"]] = r["ts"]
    receives = [r for r in parts.pop("consumer-c0") if r["op"] == "receive"]
    for cluster, delay in delays.items():
        who = {"topic": TOPIC, "cluster": cluster, "subscription": SUB, "consumer": f"c-{cluster}"}
        rows: list[Row] = [{"op": "subscribe", "ts": receives[0]["ts"] - 10**9, **who}]
        for r in receives:
            k = 2 * r["seq"] + int(r["producer"][1:])
            at = oks[r["producer"], r["seq"]] + round(delay(k) * MS)
            rows += [{**r, **who, "ts": at}, {**r, **who, "op": "ack", "type": "ok", "ts": at + MS}]
        parts[f"consumer-{cluster}"] = rows
    reads = [r for r in parts.pop("read-c1") if r["op"] == "read"]
    for cluster, prefix in ID_PREFIX.items():
        kept = [{**r, "cluster": cluster, "message_id": prefix + r["message_id"][1:]}
                for k, r in enumerate(reads) if k not in (drop or {}).get(cluster, set())]
        if twice and cluster in twice:
            again = reads[twice[cluster]]
            kept.append({**again, "cluster": cluster, "message_id": "9:0:-1:-1", "read_index": again["read_index"] + 5})
        parts[f"read-{cluster}"] = [*kept, scan_row(f"{prefix}:{n - 1}:-1:-1", len(kept), cluster=cluster)]
    directory = write_parts(tmp_path / "run", parts)
    (directory / "_run.json").write_text(json.dumps({
        "format": 1, "run": "rG", "topic": TOPIC, "partitions": 0, "cluster": "c1", "read_clusters": ["c1", "c2"],
        "consume_cluster": "c2", "finished": True, "drivers": [], "replication": {TOPIC: ["c1", "c2"]}}))
    return verify(directory)


# ms from the ack on c1 to the first receive on c2, message by message
DELAYS = [3.5, 1.25, 8.0, 2.0, 15.5, 4.0, 0.75, 6.25, 9.0, 5.5, 11.0, 7.0, 2.5, 30.0, 3.0, 12.5, 1.0, 10.0, 4.75, 120.125]


def test_replication_delay_has_exact_percentiles_per_destination(spark, tmp_path: Path) -> None:
    verdict = replicated(tmp_path, 20, {"c2": DELAYS.__getitem__})
    assert verdict.status == "pass", (verdict.reasons, nonzero(verdict))
    # sorted: 0.75 1.0 1.25 2.0 2.5 3.0 3.5 4.0 4.75 5.5 | 6.25 ... 12.5 15.5 30.0 120.125
    # nearest rank of 20: p50 the 10th, p95 the 19th, p99 and p99.9 the 20th
    assert verdict.metrics["replication_delay_ms"] == {
        "c2": {"p50": 5.5, "p95": 30.0, "p99": 120.125, "p99_9": 120.125, "max": 120.125, "count": 20}}


def test_replication_delay_both_ways_leaves_out_deliveries_on_the_acknowledging_cluster(spark, tmp_path: Path) -> None:
    """p0 acknowledged on c1, p1 on c2, a subscription on each cluster: each destination counts
    only what came from the other one."""
    verdict = replicated(
        tmp_path, 10, {"c1": lambda k: 2.0 + k / 1000, "c2": DELAYS.__getitem__},
        acked_on=lambda producer: "c1" if producer == "p0" else "c2",
    )
    assert verdict.status == "pass", (verdict.reasons, nonzero(verdict))
    # to c2: p0's messages, k = 0 2 4 6 8 -> 3.5 8.0 15.5 0.75 9.0; to c1: p1's, k = 1 3 5 7 9 -> 2.001 ... 2.009
    assert verdict.metrics["replication_delay_ms"] == {
        "c1": {"p50": 2.005, "p95": 2.009, "p99": 2.009, "p99_9": 2.009, "max": 2.009, "count": 5},
        "c2": {"p50": 8.0, "p95": 15.5, "p99": 15.5, "p99_9": 15.5, "max": 15.5, "count": 5},
    }


def test_one_cluster_run_has_no_replication_delay(spark, tmp_path: Path) -> None:
    verdict = run(tmp_path)
    assert verdict.metrics["replication_delay_ms"] == {}
    assert not [name for name in verdict.render_table().columns[0].cells if name.startswith("replication_delay_ms")]


def test_replication_delay_is_in_the_text_table(spark, tmp_path: Path) -> None:
    table = replicated(tmp_path, 20, {"c2": DELAYS.__getitem__}).render_table()
    shown = dict(zip(table.columns[0].cells, table.columns[1].cells, strict=True))
    assert shown["replication_delay_ms.c2.p50"] == "5.500 ms"
    assert shown["replication_delay_ms.c2.p99"] == "120.125 ms"
    assert shown["replication_delay_ms.c2.count"] == "20"


# -- held out: a replica's storage tampered with ---------------------------------------------------
def test_copies_dropped_from_each_replica_are_not_replicated_exactly_per_destination(spark, tmp_path: Path) -> None:
    """p0 acknowledged on c1, p1 on c2; c2 loses two of p0's copies, c1 one of p1's (and one of p0's,
    which c1 acknowledged itself: that one is lost, not unreplicated)."""
    verdict = replicated(
        tmp_path, 10, {"c1": lambda k: 2.0, "c2": lambda k: 3.0},
        acked_on=lambda producer: "c1" if producer == "p0" else "c2",
        drop={"c2": {2, 6}, "c1": {5, 8}},
    )
    assert verdict.status == "fail" and not verdict.reasons
    # a subscription receiving what its cluster does not store is no further anomaly
    assert nonzero(verdict) == {"not_replicated": 3, "lost": 1}
    examples = verdict.check("not_replicated").examples
    assert [(e["producer"], e["seq"], e["cluster"], e["acknowledged_on"]) for e in examples] == [
        ("p0", 1, "c2", "c1"), ("p0", 3, "c2", "c1"), ("p1", 2, "c1", "c2")]
    assert [(e["producer"], e["seq"], e["cluster"]) for e in verdict.check("lost").examples] == [("p0", 4, "c1")]


@pytest.mark.parametrize("cluster", ["c1", "c2"])
def test_message_stored_twice_on_one_replica_is_duplicated_there_exactly(spark, tmp_path: Path, cluster: str) -> None:
    verdict = replicated(tmp_path, 10, {"c2": lambda k: 3.0}, twice={cluster: 3})
    assert nonzero(verdict) == {"duplicated_in_storage": 1}
    [example] = verdict.check("duplicated_in_storage").examples
    assert (example["producer"], example["seq"], example["cluster"]) == ("p1", 1, cluster)
    assert verdict.check("duplicated_in_storage").by_cluster == {cluster: 1}  # counted per cluster too
