"""The copies behind ``duplicated_in_storage``: the message ids each example is stored under.

The job keeps message ids only as hashes, so once it has found messages stored twice the driver
reads them again from the storage read-back parts (only those rows, the row groups skipped by their
statistics). Where the copies sit says something about the cause: two ledgers mean the second copy
was written after the topic's ledger changed (a topic loaded again by another broker opens a new
one; a resend accepted there is what Pulsar 4.0.x's deduplication recovery race lets through), one
ledger means a resend went through with no ledger change at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow.parquet as pq

from pulsarlab.history.schema import message_position

RACE = "apache/pulsar#25954"
_COLUMNS = ("producer", "seq", "cluster", "message_id")


def name_copies(examples: list[dict[str, Any]], read_parts: Iterable[str]) -> str | None:
    """Give each example with a producer and seq its ``message_ids`` (sorted) and return a note on
    where the copies are (None when no example names a message)."""
    wanted = [e for e in examples if e.get("producer") is not None and e.get("seq") is not None]
    if not wanted:
        return None
    producers = sorted({e["producer"] for e in wanted})
    seqs = sorted({e["seq"] for e in wanted})
    found: dict[tuple[str, int], dict[str | None, set[str]]] = {}
    for path in read_parts:
        names = set(pq.ParquetFile(path).schema_arrow.names)
        if not {"op", "producer", "seq", "message_id"} <= names:
            continue
        rows = pq.read_table(path, columns=[c for c in _COLUMNS if c in names],
                             filters=[("op", "=", "read"), ("producer", "in", producers), ("seq", "in", seqs)])
        for row in rows.to_pylist():
            if row["message_id"]:
                found.setdefault((row["producer"], row["seq"]), {}).setdefault(row.get("cluster"), set()).add(row["message_id"])
    apart = together = 0
    for e in wanted:
        by_cluster = found.get((e["producer"], e["seq"]), {})
        ids = by_cluster.get(e.get("cluster"), set()) | by_cluster.get(None, set())
        e["message_ids"] = sorted(ids)
        ledgers = [p[0] for i in ids if (p := message_position(i)) is not None]
        if len(ledgers) > 1:
            if len(set(ledgers)) == len(ledgers):
                apart += 1
            else:
                together += 1
    if not apart + together:
        return None
    return (f"duplicated_in_storage: of {len(wanted)} example(s), {apart} have their copies in different ledgers "
            f"(written after the topic's ledger changed, as a topic loaded again by another broker does: a resend "
            f"accepted there, which Pulsar 4.0.x's deduplication recovery race lets through, {RACE}) and {together} "
            "two copies in one ledger (a resend accepted with no ledger change)")
