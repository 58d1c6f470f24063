"""The small facts the verifier's Spark plan is built from, read on the driver with pyarrow.

Only the low-cardinality columns (``op``, ``producer``, ``cluster``, ``topic``, ``subscription``,
``consumer``) are read, dictionary-encoded, one row group at a time; a column with one value in a
row group costs nothing more, the others are combined as integer codes. ``seq`` comes from the
Parquet statistics (read only when a writer left none). Nothing here is a pass over the history in
Spark, so the one big Spark aggregation that follows is the only full scan.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.verify.parts import UnreadablePart, each_file
from pulsarlab.verify.reading import first_line

PARTITION_SUFFIX = r"-partition-[0-9]+$"
MAX_CLUSTERS = 62
DIM_COLUMNS = ("op", "producer", "cluster", "topic", "subscription", "consumer")
_PARTITION = re.compile(r"-partition-([0-9]{1,9})$")


def base_topic(topic: str) -> str:
    """``persistent://t/n/x-partition-3`` -> ``persistent://t/n/x``."""
    return re.sub(PARTITION_SUFFIX, "", topic)


def partition_of(topic: str) -> int:
    """``...-partition-3`` -> 4, an unpartitioned topic -> 0 (the verifier's stored-position convention)."""
    m = _PARTITION.search(topic)
    return int(m.group(1)) + 1 if m else 0


@dataclass
class Dims:
    """The dimensions of a history, and how its files are laid out."""

    clusters: list[str]
    producers: list[str]  # every producer that sent, sorted: the index orders like the name
    scopes: dict[str, set[tuple[str, str]]]  # producer -> {(cluster, base topic)} it sent through
    scanned: set[tuple[str, str]]  # (cluster, base topic) that have read or scan rows
    subs: list[tuple[str, str]]  # (cluster, subscription); the index is the sub id
    sub_topics: dict[int, set[str]]  # sub id -> base topics it was seen on
    consumers: list[str]
    read_topics: list[str]  # topics (with partition suffix) of read rows
    files: dict[frozenset[str], list[str]] = field(default_factory=dict)  # ops present -> part files
    anonymous: bool = False  # a receive or read row without producer
    seq_range: tuple[int, int] | None = None  # (min, max) of seq; None when there is none
    foreign: list[str] = field(default_factory=list)  # producers seen only in deliveries or storage: other runs'

    def producers_of(self, topics: set[str]) -> list[str]:
        return sorted(p for p, s in self.scopes.items() if any(t in topics for _, t in s))


def dict_column(table: pa.Table, name: str) -> tuple[list[str | None], pa.Array | None]:
    """A column's distinct values and, when there are several, each row's code into them."""
    if name not in table.column_names:
        return [None], None
    col = table.column(name)
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    col = col.unify_dictionaries() if isinstance(col, pa.ChunkedArray) else col
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    values: list[str | None] = arr.dictionary.to_pylist()
    has_null = arr.null_count > 0
    if has_null:
        values.append(None)
    if len(values) <= 1:
        return values or [None], None
    codes = arr.indices.fill_null(len(values) - 1) if has_null else arr.indices
    return values, codes.cast(pa.int64())


def _combos(table: pa.Table) -> list[tuple[str | None, ...]]:
    """The distinct (op, producer, cluster, topic, subscription, consumer) rows of a table."""
    columns = [dict_column(table, c) for c in DIM_COLUMNS]
    varying = [(i, values, codes) for i, (values, codes) in enumerate(columns) if codes is not None]
    if not varying:
        return [tuple(values[0] for values, _ in columns)]
    code, radix = None, 1
    for _, values, codes in varying:
        scaled = pc.multiply(codes, radix) if radix > 1 else codes
        code = scaled if code is None else pc.add(code, scaled)
        radix *= len(values)
    out = []
    for c in pc.unique(code).to_pylist():
        row = [values[0] for values, _ in columns]
        for i, values, _ in varying:
            row[i] = values[c % len(values)]
            c //= len(values)
        out.append(tuple(row))
    return out


def column_range(pf: pq.ParquetFile, path: Path | str, column: str) -> tuple[int, int] | None:
    """(min, max) of an integer column of a file from its statistics, else from the column itself."""
    names = pf.schema_arrow.names
    if column not in names:
        return None
    index = names.index(column)
    lows, highs = [], []
    for rg in range(pf.metadata.num_row_groups):
        meta = pf.metadata.row_group(rg)
        stats = meta.column(index).statistics
        if meta.num_rows == 0:
            continue
        if stats is None or not stats.has_min_max:
            if stats is not None and stats.null_count == meta.num_rows:
                continue
            values = pq.read_table(path, columns=[column]).column(column)
            lo_hi = pc.min_max(values)
            return (lo_hi["min"].as_py(), lo_hi["max"].as_py()) if lo_hi["min"].is_valid else None
        lows.append(stats.min)
        highs.append(stats.max)
    return (min(lows), max(highs)) if lows else None


def read_dims(paths: list[Path], max_clusters: int = MAX_CLUSTERS) -> Dims:
    """Scan the dimension columns of every part file (see the module docstring)."""
    combos: set[tuple[str | None, ...]] = set()
    files: dict[frozenset[str], list[str]] = {}
    lows, highs = [], []
    for path, found, ops, seqs in each_file(_file_dims, paths):
        combos.update(found)
        if ops:
            files.setdefault(frozenset(ops), []).append(str(path))
        if seqs is not None:
            lows.append(seqs[0])
            highs.append(seqs[1])
    return _dims_from(combos, files, (min(lows), max(highs)) if lows else None, max_clusters)


def _file_dims(path: Path) -> tuple[Path, set[tuple[str | None, ...]], set[str], tuple[int, int] | None]:
    """One file's (op, producer, cluster, topic, subscription, consumer) combinations, ops and seq range."""
    try:
        names = pq.read_schema(path).names
        present = [c for c in DIM_COLUMNS if c in names]
        pf = pq.ParquetFile(path, read_dictionary=present, page_checksum_verification=True)
        combos: set[tuple[str | None, ...]] = set()
        for rg in range(pf.metadata.num_row_groups):
            combos.update(_combos(pf.read_row_group(rg, columns=present)))
        seqs = column_range(pf, path, "seq")
    except (OSError, ValueError) as exc:  # a damaged page: the caller judges again without the file
        raise UnreadablePart(path, first_line(exc)) from exc
    return path, combos, {str(r[0]) for r in combos}, seqs


def _dims_from(
    combos: set[tuple[str | None, ...]],
    files: dict[frozenset[str], list[str]],
    seq_range: tuple[int, int] | None,
    max_clusters: int,
) -> Dims:
    rows = [
        (op, producer, cluster or "", topic or "", sub or "", consumer) for op, producer, cluster, topic, sub, consumer in combos
    ]
    clusters = sorted({r[2] for r in rows})
    if len(clusters) > max_clusters:
        raise ValueError(f"{len(clusters)} clusters in one history; at most {max_clusters} are supported")
    scopes: dict[str, set[tuple[str, str]]] = {}
    scanned: set[tuple[str, str]] = set()
    sub_topics: dict[tuple[str, str], set[str]] = {}
    read_topics: set[str] = set()
    anonymous = False
    for op, producer, cluster, topic, sub, _ in rows:
        scope = (cluster, base_topic(topic))
        if op == "send" and producer is not None:
            scopes.setdefault(producer, set()).add(scope)
        elif op in ("read", "scan"):
            scanned.add(scope)
            if op == "read":
                read_topics.add(topic)
        elif op in ("receive", "ack", "subscribe"):
            sub_topics.setdefault((cluster, sub), set()).add(scope[1])
        anonymous = anonymous or (producer is None and op in ("receive", "read"))
    subs = sorted(sub_topics)
    return Dims(
        clusters=clusters,
        producers=sorted(scopes),
        scopes=scopes,
        scanned=scanned,
        subs=subs,
        sub_topics={j: sub_topics[s] for j, s in enumerate(subs)},
        consumers=sorted({r[5] for r in rows if r[0] == "receive" and r[5] is not None}),
        read_topics=sorted(read_topics),
        files=files,
        anonymous=anonymous,
        seq_range=seq_range,
        foreign=sorted({r[1] for r in rows if r[1] is not None} - scopes.keys()),
    )
