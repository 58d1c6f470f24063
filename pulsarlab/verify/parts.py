"""Is each part file whole? Its Parquet footer, checked against the file it closes and against the
history's schema, before anything reads the rows; and a part that turns out unreadable later (a
damaged page) is named the same way.

A part that fails here is left out of the verdict with one reason naming it; the verdict is then
inconclusive (see :mod:`.evidence`), never judged on rows that may be missing or misread.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from pulsarlab.history.location import local_path
from pulsarlab.history.schema import OPS, REQUIRED_COLUMNS, SCHEMA
from pulsarlab.verify.reading import NOT_THERE, UNREADABLE, first_line

_UNREADABLE_AT = re.compile(re.escape(UNREADABLE) + r"(?P<path>.+?) \((?P<why>[^\n]*)\)")
_NOT_THERE_AT = re.compile(re.escape(NOT_THERE) + r"(?P<uri>\S+)")


T = TypeVar("T")
R = TypeVar("R")


def each_file(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``fn`` of every item, in their order, a thread per core: the driver reads a history's files
    while the Spark JVM starts, and Arrow reads and computes without holding the GIL. The first
    item (in order) that raises raises here, as a loop would."""
    items = list(items)
    if len(items) < 2:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(min(len(items), os.cpu_count() or 1), thread_name_prefix="history-read") as pool:
        return list(pool.map(fn, items))


class UnreadablePart(Exception):
    """A part whose rows could not be read although its footer could: judged again without it."""

    def __init__(self, path: str | Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = Path(path)
        self.why = why


def unreadable_reason(path: str | Path, why: str) -> str:
    return f"history part {path} cannot be read ({why}): truncated, damaged or not Parquet; the verdict leaves it out"


def unreadable_in(exc: BaseException) -> UnreadablePart | None:
    """The part a failed Spark job could not read, found in the error's text (a map task's error
    arrives as text inside Spark's own exception); None when the failure is something else."""
    text = str(exc)
    if found := _UNREADABLE_AT.search(text):
        return UnreadablePart(local_path(found["path"]), found["why"])  # map tasks name parts by URI
    return None


def missing_on_executor(exc: BaseException) -> str | None:
    """One line when a failed Spark job's executor found no file where the driver read a part (a
    cluster whose hosts do not share the history's folder); None when the failure is another."""
    if found := _NOT_THERE_AT.search(str(exc)):
        return (f"a Spark executor found no history part {found['uri']}, which the driver read: on a cluster of "
                "several hosts the history must be at the same path on every host (a shared mount) or in a store "
                "every host reaches (docs/verify.md)")
    return None


def schema_problems(schema: pa.Schema) -> list[str]:
    """How a part's columns differ from the history's one schema: a column the verifier does not
    know, one of another type, a required one missing. Later columns an older part lacks are fine."""
    known = {f.name: f.type for f in SCHEMA}
    problems = [f"no column {name!r}" for name in REQUIRED_COLUMNS if name not in schema.names]
    for f in schema:
        if f.name not in known:
            problems.append(f"unknown column {f.name!r}")
        elif f.type != known[f.name]:
            problems.append(f"column {f.name!r} is {f.type}, not {known[f.name]}")
    return problems


def footer_problems(meta: pq.FileMetaData, size: int) -> list[str]:
    """Where a footer disagrees with itself or with its file: rows counted twice differently, a
    column chunk that ends past the file's data (a file that lost bytes but kept its footer)."""
    data_end = size - meta.serialized_size - 8  # the footer, its length and the magic bytes close the file
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    held = sum(g.num_rows for g in groups)
    problems = [] if held == meta.num_rows else [f"its footer says {meta.num_rows} rows, its row groups {held}"]
    for i, g in enumerate(groups):
        for c in (g.column(j) for j in range(g.num_columns)):
            starts = [o for o in (c.dictionary_page_offset, c.data_page_offset) if o]
            end = min(starts, default=0) + c.total_compressed_size
            if end > data_end:
                problems.append(f"column {c.path_in_schema!r} of row group {i} ends at byte {end}, past the file's "
                                f"data (its {size} bytes end with a footer from byte {data_end})")
                return problems
            if c.num_values > g.num_rows:
                problems.append(f"column {c.path_in_schema!r} of row group {i} holds {c.num_values} values in "
                                f"{g.num_rows} rows")
                return problems
    return problems


def readable_parts(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """The part files whose Parquet footer can be read, agrees with its file and describes the
    history's schema, and a reason for each other one (a file cut short, not Parquet at all, or of
    a schema the verifier does not know): judged without it, or on columns misread, a verdict
    could only guess."""
    good, reasons = [], []
    for path in paths:
        try:
            meta = pq.read_metadata(path)
            schema = meta.schema.to_arrow_schema()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            reasons.append(unreadable_reason(path, first_line(exc)))
            continue
        if problems := footer_problems(meta, path.stat().st_size):
            reasons.append(unreadable_reason(path, "; ".join(problems)))
        elif problems := schema_problems(schema):
            reasons.append(f"history part {path} has a schema the verifier does not know ({'; '.join(problems)});"
                           " the verdict leaves it out")
        else:
            good.append(path)
    return good, reasons


def unknown_ops(files: dict[frozenset[str], list[str]]) -> list[str]:
    """A part holding rows of an op the history does not define was written by something the
    verifier does not know: what its rows mean cannot be said. One line per file."""
    return [f"history part {path} holds rows of op(s) the verifier does not know: {', '.join(sorted(ops - OPS))}"
            for ops, paths in sorted(files.items(), key=lambda kv: sorted(kv[0])) if ops - OPS for path in paths]
