"""The run history: the Jepsen-style event table a workload writes and the verifier reads.

- :mod:`.schema`: the columns, ops and part files (``docs/history.md`` is the public description);
- :mod:`.writer`: :class:`HistoryWriter`, an Arrow IPC journal for Python code of one's own;
- :mod:`.journal`: the workload driver's binary journal and its conversion.

A journal left behind by a process that died is salvaged by :func:`recover_journals`, which
:func:`read_history` and the verifier run first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pulsarlab.history.journal import journal_bases, journal_to_parquet
from pulsarlab.history.manifest import MANIFEST
from pulsarlab.history.schema import (
    ACK_TYPES,
    COLUMNS,
    OPS,
    PART_SUFFIX,
    SCHEMA,
    SEND_TYPES,
    conform,
    part_files,
    write_table,
)
from pulsarlab.history.writer import JOURNAL_SUFFIX, HistoryWriter, journal_to_parquet_arrows, read_journal

__all__ = [
    "ACK_TYPES",
    "COLUMNS",
    "JOURNAL_SUFFIX",
    "OPS",
    "PART_SUFFIX",
    "SCHEMA",
    "SEND_TYPES",
    "HistoryWriter",
    "conform",
    "not_a_history",
    "part_files",
    "read_history",
    "read_journal",
    "recover_journals",
    "write_table",
]


def recover_journals(directory: str | os.PathLike[str]) -> list[Path]:
    """Turn journals left by writers that never closed (crash, SIGKILL) into Parquet parts: the
    Arrow IPC journals of :class:`HistoryWriter` and the workload driver's binary journals.

    Only call this once the run's processes are gone: a live writer's journal would be taken.
    Returns the Parquet files written.
    """
    written = [journal_to_parquet_arrows(j) for j in sorted(Path(directory).glob(f"*{JOURNAL_SUFFIX}"))]
    return written + [journal_to_parquet(base) for base in journal_bases(directory)]


def read_history(directory: str | os.PathLike[str], *, recover: bool = True) -> pa.Table:
    """The whole history of a run as one table with :data:`SCHEMA`.

    With ``recover`` (the default) journals of writers that never closed are first salvaged.
    """
    if recover:
        recover_journals(directory)
    tables = [pq.read_table(p, schema=SCHEMA) for p in part_files(directory)]
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


def not_a_history(directory: str | os.PathLike[str], look_inside: bool = True) -> str | None:
    """Why ``directory`` holds no run history, in one line; None when it holds one. A history has
    Parquet parts, a journal its writer left, or the run's manifest; a folder whose sub-folders
    are histories (``scenario run --out``, a matrix) is named with them."""
    d = Path(directory)
    if not d.is_dir():
        return f"no history folder {d}"
    if (d / MANIFEST).is_file() or any(d.glob(f"*{PART_SUFFIX}")) or any(d.glob(f"*{JOURNAL_SUFFIX}")) or journal_bases(d):
        return None
    inside = sorted(p.name for p in d.iterdir() if look_inside and p.is_dir() and not_a_history(p, look_inside=False) is None)
    if inside:
        shown = ", ".join(inside[:5]) + (", ..." if len(inside) > 5 else "")
        return f"{d} holds histories in its folders ({shown}), not one of its own: give each folder, e.g. {d / inside[0]}"
    return (f"{d} is not a run history: no history parts (*{PART_SUFFIX}), journal or {MANIFEST} in it "
            "('pulsarlab workload run --out DIR' writes one)")
