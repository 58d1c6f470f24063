"""The history schema: the one table layout every event of a run shares (see ``docs/history.md``).

What the workload writes and the verifier reads; nothing here writes a journal.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

# re-exported: the names of a history folder's files, decided in files.py
from pulsarlab.history.files import FAULTS_PART as FAULTS_PART
from pulsarlab.history.files import PART_SUFFIX as PART_SUFFIX
from pulsarlab.history.files import WRITE_OPTIONS as WRITE_OPTIONS

SCHEMA: Final[pa.Schema] = pa.schema(
    [
        pa.field("op", pa.string(), nullable=False),
        pa.field("type", pa.string()),
        pa.field("producer", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("key", pa.string()),
        pa.field("payload_hash", pa.string()),
        pa.field("message_id", pa.string()),
        pa.field("topic", pa.string()),
        pa.field("consumer", pa.string()),
        pa.field("subscription", pa.string()),
        pa.field("redelivery_count", pa.int32()),
        pa.field("cluster", pa.string()),
        pa.field("region", pa.string()),
        pa.field("node", pa.string()),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("publish_ts", pa.int64()),
        pa.field("read_index", pa.int64()),
        pa.field("error", pa.string()),
        pa.field("run", pa.string()),
        pa.field("end_message_id", pa.string()),
        pa.field("served_by", pa.string()),
    ]
)
"""The one schema every event kind shares; columns an event does not use are null."""

COLUMNS: Final[tuple[str, ...]] = tuple(SCHEMA.names)
REQUIRED_COLUMNS: Final = ("op", "ts")  # older histories may lack later columns (null then), never these
OPS: Final[frozenset[str]] = frozenset({"send", "receive", "ack", "nack", "read", "subscribe", "scan"})
SEND_TYPES: Final[frozenset[str]] = frozenset({"invoke", "ok", "fail", "info"})
ACK_TYPES: Final[frozenset[str]] = frozenset({"ok", "fail"})  # null on an ack: ok (histories before outcomes were recorded)


def message_position(message_id: str | None) -> tuple[int, int] | None:
    """``(ledger, entry)`` of a message id as a history holds it (``(ledger,entry,partition,batch)``,
    or ``ledger:entry:...``); None when it is not one."""
    try:
        ledger, entry, *_ = (int(x) for x in (message_id or "").strip("()").replace(":", ",").split(","))
    except ValueError:
        return None
    return ledger, entry


def conform(table: pa.Table) -> pa.Table:
    """The same rows with exactly :data:`SCHEMA`: columns cast and ordered, missing ones null."""
    if table.schema == SCHEMA:
        return table
    present = set(table.schema.names)
    return pa.Table.from_arrays(
        [table.column(f.name).cast(f.type) if f.name in present else pa.nulls(table.num_rows, f.type) for f in SCHEMA],
        schema=SCHEMA,
    )


def part_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The Parquet event parts of a run directory, sorted (``verdict.json``, ``faults.parquet`` and
    the like are not event parts)."""
    return sorted(p for p in Path(directory).glob(f"*{PART_SUFFIX}")
                  if not p.name.startswith((".", "_")) and p.stem != FAULTS_PART)


def write_table(directory: str | os.PathLike[str], part_name: str, rows: Iterable[dict[str, Any]] | pa.Table) -> Path:
    """Write a whole part at once (generators, tests, the final reader); missing columns are null."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(list(rows), schema=SCHEMA)
    target = directory / f"{part_name}{PART_SUFFIX}"
    pq.write_table(conform(table), target, **WRITE_OPTIONS)
    return target
