"""The workload driver's binary journal, and its conversion to a Parquet history part.

The driver (``pulsarlab/workload/java/Driver.java``) appends one fixed 80-byte little-endian record per event to
``<part>.events`` and every string those records refer to, once, to ``<part>.strings`` (a 4-byte
length, then UTF-8 bytes; a string's id is its position, ``-1`` is null). Both are written out
every half second, strings first. ``<part>.meta.json``, written before the driver starts, holds
the columns every row of the part shares (producer, topic, cluster, region, consumer,
subscription, node, run).

Record layout (byte offset: field):

====  ==========  ===========================================================
0     u8          kind (below)
1     u8          flags: 1 seq, 2 message id, 4 publish_ts, 8 crc, 16 read_index, 32 redelivery
4     i32         key (string id); on scan: end_message_id (string id)
8     i64         ts, ns since the epoch
16    i64         seq
24    i64, i64    message id: ledger, entry
40    i32, i32    message id: partition, batch index
48    i32         producer (string id; -1: the part's own producer)
52    i32         aux: error (string id) on send fail/info, ack fail and scan; redelivery count on receive
56    u32         CRC-32 of the payload
60    i32         topic (string id; -1: the part's own topic)
64    i64         publish_ts
72    i64         read_index; on scan: how many messages the scan read
====  ==========  ===========================================================

Kinds and the rows they become (``op``/``type``):

====  ==================  ======================================================================
1-4   send                invoke, ok, fail, info
5     receive
6     ack / ok            the acknowledgement's receipt arrived
7     nack
8     read
9     ack / fail          the acknowledgement failed; aux is the error
10    subscribe           topic is the subscribed topic; no message id
11    scan                one per partition scanned: read_index = messages read, message id = the
                          last one read (flag 2 unset: none), key slot = end_message_id (-1:
                          unknown), aux = why the scan stopped early (-1: it reached the end)
====  ==================  ======================================================================

A process killed mid-write leaves a partial last record (dropped here) and never a record whose
strings are missing.
"""

from __future__ import annotations

import functools
import json
import os
import struct
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.history.schema import PART_SUFFIX, SCHEMA, WRITE_OPTIONS, conform

EVENTS_SUFFIX: Final = ".events"
STRINGS_SUFFIX: Final = ".strings"
META_SUFFIX: Final = ".meta.json"

RECORD: Final = np.dtype(
    [
        ("kind", "u1"),
        ("flags", "u1"),
        ("reserved", "<u2"),
        ("key", "<i4"),
        ("ts", "<i8"),
        ("seq", "<i8"),
        ("ledger", "<i8"),
        ("entry", "<i8"),
        ("partition", "<i4"),
        ("batch", "<i4"),
        ("producer", "<i4"),
        ("aux", "<i4"),
        ("crc", "<u4"),
        ("topic", "<i4"),
        ("publish_ts", "<i8"),
        ("read_index", "<i8"),
    ]
)
assert RECORD.itemsize == 80

HAS_SEQ, HAS_ID, HAS_PUBLISH_TS, HAS_CRC, HAS_READ_INDEX, HAS_REDELIVERY = 1, 2, 4, 8, 16, 32
ACK_FAIL, SUBSCRIBE, SCAN = 9, 10, 11
KIND_OP: Final = [None, "send", "send", "send", "send", "receive", "ack", "nack", "read", "ack", "subscribe", "scan"]
KIND_TYPE: Final = [None, "invoke", "ok", "fail", "info", None, "ok", None, None, "fail", None, None]
CONSTANT_COLUMNS: Final = ("producer", "topic", "cluster", "region", "consumer", "subscription", "node", "run")
@functools.cache
def _hex_bytes() -> pa.Array:
    # built on first use: converting a Python list makes pyarrow import pandas (0.4 s), which
    # every command importing the history would otherwise pay at its start
    return pa.array([f"{i:02x}" for i in range(256)], type=pa.string())


def write_meta(base: Path, constants: dict[str, str | None], clusters_from: list[tuple[int, str]] | None = None) -> None:
    """Write the part's shared columns before its driver starts; again whenever its client moved to
    another cluster (``clusters_from``: from each wall-clock ns on, that cluster served the events:
    the ``served_by`` column, and a producer's ``cluster``; a consumer's ``cluster`` stays its
    subscription's, one subscription wherever it was served from)."""
    unknown = constants.keys() - set(CONSTANT_COLUMNS)
    if unknown:
        raise TypeError(f"unknown constant columns: {sorted(unknown)}")
    meta: dict[str, object] = {"format": 1, "record_size": RECORD.itemsize, "constants": constants}
    if clusters_from:
        meta["clusters_from"] = [[int(ts), c] for ts, c in clusters_from]
    path = Path(f"{base}{META_SUFFIX}")
    partial = path.with_name(f".{path.name}.tmp")  # read while a driver runs: never half a file
    partial.write_text(json.dumps(meta))
    os.replace(partial, path)


def read_strings(path: Path) -> list[str]:
    """Every complete string of a strings file, in id order."""
    data = path.read_bytes() if path.exists() else b""
    out, at = [], 0
    while at + 4 <= len(data):
        (n,) = struct.unpack_from("<i", data, at)
        if at + 4 + n > len(data):
            break
        out.append(data[at + 4 : at + 4 + n].decode("utf-8", errors="replace"))
        at += 4 + n
    return out


def read_events(base: Path) -> pa.Table:
    """A journal's events as a history table (:data:`~pulsarlab.history.schema.SCHEMA`)."""
    events = Path(f"{base}{EVENTS_SUFFIX}")
    meta_path = Path(f"{base}{META_SUFFIX}")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"constants": {}}
    if meta.get("record_size", RECORD.itemsize) != RECORD.itemsize:  # another layout: its bytes would be misread
        raise ValueError(f"{meta_path} says records of {meta['record_size']} bytes, this version reads {RECORD.itemsize}")
    constants: dict[str, str | None] = meta.get("constants", {})
    data = events.read_bytes() if events.exists() else b""
    r = np.frombuffer(data, RECORD, count=len(data) // RECORD.itemsize)
    r = r[(r["kind"] >= 1) & (r["kind"] < len(KIND_OP))]  # a copy: every field below is a strided view of it
    strings = pa.array(read_strings(Path(f"{base}{STRINGS_SUFFIX}")), pa.string())
    kind, flags = pa.array(r["kind"]).cast(pa.int32()), r["flags"]
    n = len(r)

    def ids(field: str, valid: np.ndarray | None = None) -> pa.Array:
        values = r[field]
        ok = (values >= 0) & (values < len(strings)) if valid is None else valid & (values >= 0) & (values < len(strings))
        return pc.take(strings, pa.array(values, mask=~ok))

    def text(field: str, constant: str | None) -> pa.Array:
        col = ids(field)
        return pc.fill_null(col, constant) if constant is not None else col

    def flagged(field: str, flag: int, kind_type: pa.DataType | None = None) -> pa.Array:
        return pa.array(r[field], mask=(flags & flag) == 0).cast(kind_type or pa.int64())

    failed = np.isin(r["kind"], (3, 4, ACK_FAIL, SCAN))
    scan = r["kind"] == SCAN
    has_id = (flags & HAS_ID) != 0
    columns = {
        "op": pc.take(pa.array(KIND_OP, pa.string()), kind),
        "type": pc.take(pa.array(KIND_TYPE, pa.string()), kind),
        "producer": text("producer", constants.get("producer")),
        "seq": flagged("seq", HAS_SEQ),
        "key": ids("key", ~scan),
        "payload_hash": _hex32(pa.array(r["crc"], mask=(flags & HAS_CRC) == 0)),
        "message_id": _message_ids(r, has_id),
        "topic": text("topic", constants.get("topic")),
        "redelivery_count": flagged("aux", HAS_REDELIVERY, pa.int32()),
        "ts": pa.array(r["ts"]),
        "publish_ts": flagged("publish_ts", HAS_PUBLISH_TS),
        "read_index": flagged("read_index", HAS_READ_INDEX),
        "error": ids("aux", failed),
        "end_message_id": ids("key", scan),
    }
    for name in ("consumer", "subscription", "cluster", "region", "node", "run"):
        value = constants.get(name)
        if value is not None:
            columns[name] = pa.repeat(pa.scalar(value, pa.string()), n)
    if meta.get("clusters_from"):  # a client that fails over between clusters by itself
        columns["served_by"] = _clusters_at(r["ts"], constants.get("cluster"), meta["clusters_from"])
        if constants.get("producer") is not None:  # a send's cluster is where it went (and was acknowledged)
            columns["cluster"] = columns["served_by"]
    return conform(pa.table(columns))


def _clusters_at(ts: np.ndarray, first: str | None, clusters_from: list[list[int | str]]) -> pa.Array:
    """Each event's cluster: ``first`` until the first switch, then the cluster of the last switch
    at or before the event."""
    switches = sorted((int(t), str(c)) for t, c in clusters_from)
    names = pa.array([first, *(c for _, c in switches)], pa.string())
    which = np.searchsorted(np.array([t for t, _ in switches], dtype=np.int64), ts, side="right")
    return pc.take(names, pa.array(which))


def _hex32(values: pa.Array) -> pa.Array:
    """Unsigned 32-bit values as 8 lowercase hex digits, vectorised (null stays null)."""
    v = values.cast(pa.int64())
    parts = [pc.take(_hex_bytes(), pc.bit_wise_and(pc.shift_right(v, shift), 0xFF)) for shift in (24, 16, 8, 0)]
    return pc.binary_join_element_wise(*parts, "")


def _message_ids(r: np.ndarray, has_id: np.ndarray) -> pa.Array:
    """``(ledger,entry,partition,batch)``, the text the Python client gives a message id."""
    mask = ~has_id
    fields = [pa.array(r[f], mask=mask).cast(pa.string()) for f in ("ledger", "entry", "partition", "batch")]
    inner = pc.binary_join_element_wise(*fields, ",")
    return pc.binary_join_element_wise("(", inner, ")", "")


def journal_bases(directory: str | os.PathLike[str]) -> list[Path]:
    """The driver journals in a run directory (as ``<dir>/<part>`` without suffix)."""
    return sorted(p.with_suffix("") for p in Path(directory).glob(f"*{EVENTS_SUFFIX}"))


def journal_to_parquet(base: Path) -> Path:
    """Convert one driver journal into ``<part>.parquet`` and remove the journal files (idempotent)."""
    target = Path(f"{base}{PART_SUFFIX}")
    if not Path(f"{base}{EVENTS_SUFFIX}").exists():  # converted already: never overwrite a part with nothing
        return target
    partial = base.with_name(f".{base.name}.parquet.tmp")
    pq.write_table(read_events(base), partial, **WRITE_OPTIONS)
    os.replace(partial, target)
    for suffix in (EVENTS_SUFFIX, STRINGS_SUFFIX, META_SUFFIX):
        Path(f"{base}{suffix}").unlink(missing_ok=True)
    return target


__all__ = ["RECORD", "SCHEMA", "journal_bases", "journal_to_parquet", "read_events", "read_strings", "write_meta"]
