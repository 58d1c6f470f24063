"""A plain single-process checker (pyarrow + Python sets), to compare the Spark verifier against.

Implements lost, never_delivered, duplicated_in_storage and unexpected with the same rules as
``pulsarlab.verify`` for a single-cluster history (read rows are the storage view), and
not_replicated (an acknowledged message missing from a cluster its topic replicates to, per the
run manifest, counted per destination). Usage: ``python bench/reference_checker.py RUN_DIR``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from pulsarlab.history import SCHEMA, part_files

SEQ_BITS = 40  # a message is producer_id << 40 | seq, so sets hold small ints, not tuples


def _codes(table: pa.Table, producer_ids: dict[str, int]) -> list[int]:
    pids = [producer_ids.setdefault(p, len(producer_ids)) for p in table.column("producer").to_pylist()]
    return [(p << SEQ_BITS) | s for p, s in zip(pids, table.column("seq").to_pylist(), strict=True)]


def check(directory: str | Path) -> dict[str, int]:
    """Counts per check for one run directory."""
    data = ds.dataset([str(p) for p in part_files(directory)], schema=SCHEMA, format="parquet")
    op, kind = pc.field("op"), pc.field("type")
    cols = ["producer", "seq"]
    producer_ids: dict[str, int] = {}
    invoked = set(_codes(data.to_table(cols, filter=(op == "send") & (kind == "invoke")), producer_ids))
    acked = set(_codes(data.to_table(cols, filter=(op == "send") & (kind == "ok")), producer_ids))
    reads = data.to_table([*cols, "message_id"], filter=op == "read")
    stored_ids: dict[int, set[str]] = defaultdict(set)
    for code, mid in zip(_codes(reads, producer_ids), reads.column("message_id").to_pylist(), strict=True):
        stored_ids[code].add(mid)
    del reads
    recv = data.to_table([*cols, "subscription"], filter=op == "receive")
    delivered: dict[str, set[int]] = defaultdict(set)
    for code, sub in zip(_codes(recv, producer_ids), recv.column("subscription").to_pylist(), strict=True):
        delivered[sub].add(code)
    del recv
    stored = stored_ids.keys()
    seen = set(stored).union(*delivered.values())
    return {
        "lost": len(acked - stored),
        "not_replicated": _not_replicated(Path(directory), data, producer_ids),
        "never_delivered": sum(len(stored - got) for got in delivered.values()),
        "duplicated_in_storage": sum(1 for ids in stored_ids.values() if len(ids) > 1),
        "unexpected": len(seen - invoked),
    }


def _not_replicated(directory: Path, data: ds.Dataset, producer_ids: dict[str, int]) -> int:
    manifest = directory / "_run.json"
    targets = json.loads(manifest.read_text()).get("replication") or {} if manifest.exists() else {}
    if not targets:
        return 0
    op, kind = pc.field("op"), pc.field("type")
    cols = ["producer", "seq", "cluster", "topic"]
    stored_on: dict[str, set[int]] = defaultdict(set)
    reads = data.to_table(cols, filter=op == "read")
    for code, cluster in zip(_codes(reads, producer_ids), reads.column("cluster").to_pylist(), strict=True):
        stored_on[cluster].add(code)
    acks = data.to_table(cols, filter=(op == "send") & (kind == "ok"))
    missing = set()
    for code, cluster, topic in zip(_codes(acks, producer_ids), acks.column("cluster").to_pylist(),
                                    acks.column("topic").to_pylist(), strict=True):
        for dest in targets.get(re.sub(r"-partition-[0-9]+$", "", topic or ""), []):
            if dest != cluster and code not in stored_on[dest]:
                missing.add((code, dest))
    return len(missing)


def main() -> None:
    started = time.monotonic()
    counts = check(sys.argv[1])
    print(json.dumps({"seconds": time.monotonic() - started, "counts": counts}))


if __name__ == "__main__":
    main()
