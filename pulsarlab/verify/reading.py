"""The map side's reading: a task's row groups of one part file, opened by URI on the executor.

A task reads only the columns its ops need (the low-cardinality strings dictionary-encoded), with
every page's checksum verified, and leaves out of a row group the columns that only name deliveries
without a producer when its statistics say it has none. What it read becomes events
(:func:`~.events.encode`); a part it cannot read raises an error the driver finds the part in
(:mod:`.parts`). Shipped to executors by value like :mod:`.events`: they need pyarrow only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pulsarlab.verify.events import ANONYMOUS, BATCH_ROWS, Context, binary, distinct, encode, event_schema, ipc, split

UNREADABLE = "pulsarlab: cannot read history part "  # starts the error of a map task that could not read a part
NOT_THERE = "pulsarlab: no history part on this executor: "  # + the URI the driver read and the executor cannot find
_DICTIONARY = frozenset({"op", "type", "producer", "cluster", "topic", "subscription", "consumer", "key"})


def first_line(exc: BaseException) -> str:
    """An error's first line (its type's name when it says nothing)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class Unit:
    """Some row groups of one part file, read by one task."""

    path: str  # a URI (file:///abs/..., s3://...): the executor's working directory means nothing
    row_groups: tuple[int, ...]
    columns: tuple[str, ...]
    op: str | None  # the op of every row when the file holds one kind only and has no op column read
    # columns read only to name deliveries without a producer: left out of a row group whose
    # producer statistics say every row has one (message ids are the costliest column to read)
    named_only: tuple[str, ...] = ()


def columns_for(unit: Unit, meta: pq.FileMetaData, rg: int) -> list[str]:
    """The columns to read of row group ``rg``: without ``unit.named_only`` when its producer
    statistics count no null (missing statistics: every column)."""
    if unit.named_only:
        group = meta.row_group(rg)
        for i in range(group.num_columns):
            if group.column(i).path_in_schema == "producer":
                stats = group.column(i).statistics
                if stats is not None and stats.has_null_count and stats.null_count == 0:
                    return [c for c in unit.columns if c not in unit.named_only]
                break
    return list(unit.columns)


_OPENED: dict[str, tuple[Any, str]] = {}  # a part's URI -> (file system, path in it), per executor process


def open_uri(uri: str) -> tuple[Any, str]:
    """``(pyarrow file system, path in it)`` of a part's URI, on the executor: the driver made
    every path absolute and a URI, so nothing depends on this process's working directory.
    Each URI is resolved once per process (a unit is a few row groups: a file has several)."""
    if uri not in _OPENED:
        filesystem, path = pafs.FileSystem.from_uri(uri)
        if filesystem.get_file_info(path).type == pafs.FileType.NotFound:  # the driver read it: not this host's
            raise FileNotFoundError(f"{NOT_THERE}{uri} (on {socket.gethostname()}, working directory {os.getcwd()})")
        _OPENED[uri] = filesystem, path
    return _OPENED[uri]


def read_unit(unit: Unit, ctx: Context) -> Iterator[tuple[pa.RecordBatch, pa.Table | None]]:
    """The events of one unit's rows, a batch at a time, each with the deliveries without a
    producer among those rows (None when the history has none)."""
    filesystem, path = open_uri(unit.path)  # a store this host cannot open is no part's fault
    pf = None
    for rg in unit.row_groups:
        try:  # page checksums verified: a damaged page is an error here, not wrong values
            if pf is None:
                pf = pq.ParquetFile(path, filesystem=filesystem, page_checksum_verification=True,
                                    read_dictionary=[c for c in unit.columns if c in _DICTIONARY])
            columns = columns_for(unit, pf.metadata, rg)
            table = pf.read_row_group(rg, columns=columns, use_threads=False)
            if len(columns) < len(unit.columns) and table.column("producer").null_count:
                raise ValueError(f"its statistics count no null producer, its rows hold {table.column('producer').null_count}")
        except (OSError, ValueError) as exc:  # the driver finds the part named in this text
            raise OSError(f"{UNREADABLE}{unit.path} (row group {rg}: {first_line(exc)})") from exc
        for batch in table.to_batches(max_chunksize=BATCH_ROWS):
            yield encode(batch, ctx, unit.op), anonymous(batch, unit.op) if ctx.anonymous else None


def anonymous(batch: pa.RecordBatch, op: str | None) -> pa.Table | None:
    """The receive and read rows without a producer (unexpected by definition: no send can match
    them), as distinct (cluster, topic, message_id) with "" for a null cluster or topic; None when
    there is none."""
    if "producer" not in batch.schema.names or not batch.column("producer").null_count:
        return None
    mask = batch.column("producer").is_null()
    if op is None:
        mask = pc.and_(mask, pc.is_in(batch.column("op"), pa.array(["receive", "read"]))).fill_null(False)
    elif op not in ("receive", "read"):
        return None
    if not pc.any(mask).as_py():
        return None
    rows = batch.filter(mask)

    def text(name: str) -> pa.Array:
        if name not in rows.schema.names:
            return pa.nulls(rows.num_rows, pa.string())
        col = rows.column(name)
        return pc.cast(col.dictionary_decode() if pa.types.is_dictionary(col.type) else col, pa.string())

    table = pa.table({"cluster": text("cluster").fill_null(""), "topic": text("topic").fill_null(""),
                      "message_id": text("message_id")}, schema=ANONYMOUS)
    return distinct(table)


def shipped_units(
    units: list[Unit], ctx: Context, routes: tuple[int, ...], ids: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The body of the map task: each unit's events, one Arrow IPC blob per reduce task, as rows
    ``(route, payload)`` that Spark's hash exchange delivers to that task (see ``exchange.routes``)."""
    for ids_batch in ids:
        for i in ids_batch.column(0).to_pylist():
            read = list(read_unit(units[i], ctx))
            events = pa.Table.from_batches([e for e, _ in read], schema=event_schema(ctx.one_key)).combine_chunks()
            if unknown := [a for _, a in read if a is not None]:  # all to one reduce task, which counts them
                yield pa.record_batch({"route": pa.array([routes[0]], pa.int64()),
                                       "payload": binary(ipc(distinct(pa.concat_tables(unknown))))})
            for p, some in split(events, len(routes)):
                yield pa.record_batch({"route": pa.array([routes[p]], pa.int64()), "payload": binary(ipc(some))})
