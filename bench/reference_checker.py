"""A reference checker for run histories: pyarrow and numpy in one process, no Spark.

Written from ``docs/history.md`` alone (not from ``pulsarlab/verify``), so the Spark verifier can
be compared against an independent reading of the same rules. Every check, the evidence rules
(complete ``scan`` rows, the ``_run.json`` manifest) and the three verdicts are implemented;
:func:`check` returns a plain dict. Where the spec leaves a detail open, this file picks one and
says so in a comment marked "reading:".

Usage: ``python bench/reference_checker.py RUN_DIR [RUN_DIR ...]`` prints the verdict as JSON.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from pulsarlab.history import SCHEMA, part_files, recover_journals

# the check names of docs/history.md, in its order (not imported from pulsarlab.verify: this file stays independent)
CHECKS = ("lost", "not_replicated", "never_delivered", "corrupted", "duplicated_in_storage", "duplicated_delivery", "unexpected",
          "failed_but_stored", "order_violations_producer", "order_violations_key", "recovered")
ABSENCE = frozenset({"lost", "not_replicated", "never_delivered"})
DEFAULT_FORBIDDEN = frozenset(CHECKS) - {"order_violations_key", "recovered"}
MSG = ["producer", "seq"]
SUB = ["cluster", "topic", "subscription"]  # topic without its -partition-N suffix
COLUMNS = ["op", "type", "producer", "seq", "key", "payload_hash", "message_id", "topic", "consumer", "subscription",
           "cluster", "ts", "read_index", "error", "end_message_id"]
PARTITION = re.compile(r"-partition-\d+$")


@dataclass
class Evidence:
    reasons: list[str] = field(default_factory=list)
    producer_failed: bool = False


def base_topic(topic: str) -> str:
    return PARTITION.sub("", topic)


def position(message_id: str | None) -> tuple[int, int] | None:
    """(ledger, entry) of a message id written as ``(ledger,entry,partition,batch)``."""
    if message_id is None:
        return None
    nums = re.findall(r"-?\d+", message_id)
    return (int(nums[0]), int(nums[1])) if len(nums) >= 2 else None


# ----- loading -------------------------------------------------------------------------------

def load(directories: list[Path]) -> pa.Table:
    """All rows of all parts; ``topic`` without partition suffix in ``topic``, as written in ``ptopic``;
    null clusters, topics and subscriptions become "" so joins match them."""
    files = []
    for d in directories:
        recover_journals(d)
        files += [str(p) for p in part_files(d)]
    t = ds.dataset(files, schema=SCHEMA, format="parquet").to_table(COLUMNS)
    for name in ("cluster", "topic", "subscription", "consumer"):
        t = t.set_column(t.schema.get_field_index(name), name, pc.fill_null(t[name], ""))
    t = t.append_column("ptopic", t["topic"])
    base = pc.replace_substring_regex(t["topic"], PARTITION.pattern, "")
    return t.set_column(t.schema.get_field_index("topic"), "topic", base)


def rows(t: pa.Table, op: str) -> pa.Table:
    return t.filter(pc.equal(t["op"], op))


def distinct(t: pa.Table, cols: list[str]) -> pa.Table:
    return t.select(cols).group_by(cols, use_threads=False).aggregate([])


def manifests(directories: list[Path]) -> list[dict[str, Any]]:
    found = []
    for d in directories:
        path = Path(d) / "_run.json"
        if path.exists():
            found.append(json.loads(path.read_text()))
    return found


def replicas(runs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(base topic, cluster) for every cluster a manifest says a topic replicates to."""
    return {(base_topic(t), c) for m in runs for t, clusters in (m.get("replication") or {}).items() for c in clusters}


# ----- evidence ------------------------------------------------------------------------------

def evidence(t: pa.Table, runs: list[dict[str, Any]], acked: pa.Table) -> Evidence:
    """The reasons a verdict cannot be pass: missing complete scans, failed drivers, unfinished runs."""
    ev = Evidence()
    for m in runs:
        if not m.get("finished", False):
            ev.reasons.append(f"run {m.get('run')} never finished (_run.json finished=false)")
        for d in m.get("drivers", []):
            if d.get("failed"):
                ev.reasons.append(f"driver {d.get('name')} ({d.get('mode')}) failed: {d.get('reason')}")
                ev.producer_failed |= d.get("mode") == "produce"
    declared: dict[str, set[str]] = defaultdict(set)
    for m in runs:
        if m.get("topic") is not None:
            topic, n = base_topic(m["topic"]), int(m.get("partitions") or 0)
            declared[topic] |= {f"{topic}-partition-{i}" for i in range(n)} if n else {topic}
    scans = rows(t, "scan").select(["cluster", "topic", "ptopic", "read_index", "message_id", "end_message_id", "error"])
    named: dict[tuple[str, str], set[str]] = defaultdict(set)
    complete: set[tuple[str, str]] = set()
    why: dict[tuple[str, str], str] = {}
    for s in scans.to_pylist():
        named[(s["cluster"], s["topic"])].add(s["ptopic"])
        end, last = position(s["end_message_id"]), position(s["message_id"])
        if s["error"] is None and end is not None and (end[1] == -1 or (last is not None and last >= end)):
            complete.add((s["cluster"], s["ptopic"]))
        else:
            why.setdefault((s["cluster"], s["ptopic"]), s["error"] or f"stopped at {s['message_id']}, end {s['end_message_id']}")
    # reading: one reason per (cluster, partition) without a complete scan ("each such fact"); the clusters a
    # topic replicates to (the manifest's replication) need one as much as the cluster that acknowledged.
    pairs = distinct(acked, ["cluster", "topic"])
    needed = set(zip(pairs["cluster"].to_pylist(), pairs["topic"].to_pylist(), strict=True))
    needed |= {(c, t) for t, c in replicas(runs) if t in {topic for _, topic in needed}}
    for cluster, topic in sorted(needed):
        parts = declared.get(topic) or named.get((cluster, topic))
        if not parts:
            ev.reasons.append(f"no complete read-back of {topic} on cluster {cluster}: no scan")
            continue
        for p in sorted(p for p in parts if (cluster, p) not in complete):
            ev.reasons.append(f"no complete read-back of {p} on cluster {cluster}: {why.get((cluster, p), 'no scan')}")
    return ev


# ----- the checks ----------------------------------------------------------------------------

def outcomes(sends: pa.Table) -> pa.Table:
    """One row per message sent: invoked, ok, fail, info (info also when no completion was recorded)."""
    kind = sends["type"]
    flags = sends.select(MSG).append_column("inv", pc.equal(kind, "invoke")).append_column("ok", pc.equal(kind, "ok"))
    flags = flags.append_column("fail", pc.equal(kind, "fail")).append_column("info", pc.equal(kind, "info"))
    g = flags.group_by(MSG, use_threads=False).aggregate([(c, "any") for c in ("inv", "ok", "fail", "info")])
    ok, fail, info = g["ok_any"], g["fail_any"], g["info_any"]
    done = pc.or_(pc.or_(ok, fail), info)
    outcome = pc.if_else(ok, "ok", pc.if_else(info, "info", pc.if_else(fail, "fail", "info")))
    # reading: a completion without its invoke row still makes the message "sent".
    return g.select(MSG).append_column("outcome", outcome).append_column("invoked", pc.or_(g["inv_any"], done))


def count_backwards(group_codes: np.ndarray, seqs: np.ndarray) -> int:
    """Rows, already sorted within groups, whose seq is lower than the previous row's of the same group."""
    if len(seqs) < 2:
        return 0
    same = group_codes[1:] == group_codes[:-1]
    return int(np.count_nonzero(same & (seqs[1:] < seqs[:-1])))


def codes(t: pa.Table, cols: list[str]) -> np.ndarray:
    """A dense integer per distinct combination of ``cols`` (nulls are a value of their own)."""
    combined = np.zeros(t.num_rows, dtype=np.int64)
    for c in cols:
        enc = pc.dictionary_encode(t[c].combine_chunks(), null_encoding="encode")
        idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        combined = combined * (len(enc.dictionary) + 1) + idx
    return np.unique(combined, return_inverse=True)[1]


def order_producer(reads: pa.Table) -> int:
    s = reads.sort_by([("cluster", "ascending"), ("ptopic", "ascending"), ("producer", "ascending"), ("read_index", "ascending")])
    return count_backwards(codes(s, ["cluster", "ptopic", "producer"]), s["seq"].to_numpy())


def order_key(receives: pa.Table) -> int:
    # reading: unkeyed messages (null key) form a key group of their own; equal receive times are ordered by seq.
    first = receives.sort_by([("ts", "ascending"), ("seq", "ascending")])
    g = codes(first, [*SUB, *MSG])
    _, idx = np.unique(g, return_index=True)  # each message's first delivery per subscription
    first = first.take(pa.array(np.sort(idx)))
    order = [(c, "ascending") for c in (*SUB, "consumer", "key", "producer", "ts")]
    first = first.sort_by(order)
    return count_backwards(codes(first, [*SUB, "consumer", "key", "producer"]), first["seq"].to_numpy())


def verdict(bad: set[str], ev: Evidence) -> str:
    """With reasons: fail only on a presence check and no producer failed; without: fail on any forbidden check."""
    if ev.reasons:
        return "fail" if (bad - ABSENCE) and not ev.producer_failed else "inconclusive"
    return "fail" if bad else "pass"


def identified(x: pa.Table) -> pa.Array:
    return pc.and_(pc.is_valid(x["producer"]), pc.is_valid(x["seq"]))


def check(directories: list[str | Path] | str | Path, forbid: frozenset[str] = DEFAULT_FORBIDDEN) -> dict[str, Any]:
    """The verdict for one or more history directories judged together: status, reasons, counts, messages, notes."""
    dirs = [Path(d) for d in (directories if isinstance(directories, list) else [directories])]
    t = load(dirs)
    sends = rows(t, "send")
    out = outcomes(sends)
    senders = pc.unique(sends["producer"])

    def ours(x: pa.Table) -> pa.Table:  # identified, and of a producer that sent something here
        return x.filter(pc.and_(identified(x), pc.is_in(x["producer"], senders)))

    raw_reads, raw_recv = rows(t, "read"), rows(t, "receive")
    foreign = pa.concat_tables([x.filter(pc.and_(identified(x), pc.invert(pc.is_in(x["producer"], senders))))
                                for x in (raw_reads, raw_recv)])
    reads, recv = ours(raw_reads), ours(raw_recv)
    acks = ours(rows(t, "ack"))
    ok_acks = acks.filter(pc.fill_null(pc.equal(acks["type"], "ok"), True))  # null type counts as ok
    acked = sends.filter(pc.equal(sends["type"], "ok"))
    counts: dict[str, int] = {}

    stored_on = distinct(reads, ["cluster", *MSG])
    counts["lost"] = distinct(acked, ["cluster", *MSG]).join(stored_on, ["cluster", *MSG], join_type="left anti").num_rows
    # an acknowledged message of a replicated topic, missing from a replica (another cluster of the topic's replication).
    # reading: counted even where the replica was never scanned (the verdict is inconclusive then anyway).
    targets = sorted(replicas(manifests(dirs)))
    dest = pa.table({"topic": [t for t, _ in targets], "dest": [c for _, c in targets]}, schema=pa.schema(
        [("topic", pa.string()), ("dest", pa.string())]))
    want = distinct(acked, ["cluster", "topic", *MSG]).join(dest, ["topic"], join_type="inner")
    want = distinct(want.filter(pc.not_equal(want["cluster"], want["dest"])), ["dest", *MSG]).rename_columns(["cluster", *MSG])
    counts["not_replicated"] = want.join(stored_on, ["cluster", *MSG], join_type="left anti").num_rows

    # reading: a subscription is known from its subscribe rows and from receives of this run's messages; every
    # identified stored message of this run counts, an unexpected one too.
    subs = pa.concat_tables([distinct(rows(t, "subscribe"), SUB), distinct(recv, SUB)])
    subs = distinct(subs, SUB)
    stored = distinct(reads, ["cluster", "topic", *MSG])
    expected = stored.join(subs, ["cluster", "topic"], join_type="inner")
    counts["never_delivered"] = expected.join(distinct(recv, [*SUB, *MSG]), [*SUB, *MSG], join_type="left anti").num_rows

    invoked_hash = distinct(sends.filter(pc.and_(pc.equal(sends["type"], "invoke"), pc.is_valid(sends["payload_hash"]))),
                            [*MSG, "payload_hash"]).rename_columns([*MSG, "sent_hash"])
    seen_hash = pa.concat_tables([x.select([*MSG, "payload_hash"]) for x in (reads, recv)])
    seen_hash = seen_hash.filter(pc.is_valid(seen_hash["payload_hash"])).join(invoked_hash, MSG, join_type="inner")
    corrupt = seen_hash.filter(pc.not_equal(seen_hash["payload_hash"], seen_hash["sent_hash"]))
    counts["corrupted"] = distinct(corrupt, MSG).num_rows

    ids = distinct(reads, ["cluster", *MSG, "message_id"]).group_by(["cluster", *MSG], use_threads=False).aggregate(
        [("message_id", "count")])
    counts["duplicated_in_storage"] = pc.sum(pc.greater(ids["message_id_count"], 1)).as_py() or 0

    first_ack = ok_acks.select([*SUB, *MSG, "ts"]).group_by([*SUB, *MSG], use_threads=False).aggregate([("ts", "min")])
    late = recv.select([*SUB, *MSG, "ts"]).join(first_ack, [*SUB, *MSG], join_type="inner")
    counts["duplicated_delivery"] = distinct(late.filter(pc.greater(late["ts"], late["ts_min"])), [*SUB, *MSG]).num_rows

    seen = distinct(pa.concat_tables([reads.select(MSG), recv.select(MSG)]), MSG)
    invoked = out.filter(out["invoked"]).select(MSG)
    headerless = pa.concat_tables([x.filter(pc.invert(identified(x))) for x in (raw_reads, raw_recv)])
    # reading: a message without a header is one unexpected message per (cluster, topic, message id).
    counts["unexpected"] = seen.join(invoked, MSG, join_type="left anti").num_rows + distinct(
        headerless, ["cluster", "topic", "message_id"]).num_rows

    seen_out = seen.join(out, MSG, join_type="inner")
    counts["failed_but_stored"] = pc.sum(pc.equal(seen_out["outcome"], "fail")).as_py() or 0
    counts["order_violations_producer"] = order_producer(reads)
    counts["order_violations_key"] = order_key(recv)
    counts["recovered"] = pc.sum(pc.equal(seen_out["outcome"], "info")).as_py() or 0

    ev = evidence(t, manifests(dirs), acked)
    bad = {c for c, n in counts.items() if n and c in forbid}
    status = verdict(bad, ev)
    info = pc.equal(out["outcome"], "info")
    found = pa.concat_tables([stored_on.select(MSG), recv.select(MSG)])
    indeterminate = out.filter(info).join(distinct(found, MSG), MSG, join_type="left anti").num_rows
    messages = {
        "sent": invoked.num_rows,
        "acknowledged": pc.sum(pc.equal(out["outcome"], "ok")).as_py() or 0,
        "failed": pc.sum(pc.equal(out["outcome"], "fail")).as_py() or 0,
        "info": pc.sum(info).as_py() or 0,
        "indeterminate": indeterminate,
        "stored": distinct(reads, MSG).num_rows,
        "delivered": distinct(recv, MSG).num_rows,
    }
    n_foreign = distinct(foreign, MSG).num_rows
    notes = [f"{n_foreign} message(s) of other runs left out"] if n_foreign else []
    return {"status": status, "reasons": ev.reasons, "counts": counts, "messages": messages, "notes": notes,
            "foreign": n_foreign}


def main() -> None:
    started = time.monotonic()
    result = check(sys.argv[1:])
    print(json.dumps({"seconds": time.monotonic() - started, **result}))


if __name__ == "__main__":
    main()
