"""A run's history folder as a whole: journals a dead writer left salvaged into parts, every
part read as one table, and whether a folder holds a history at all."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pulsarlab.history.journal import journal_bases, journal_to_parquet
from pulsarlab.history.manifest import MANIFEST
from pulsarlab.history.schema import PART_SUFFIX, REQUIRED_COLUMNS, SCHEMA, part_files
from pulsarlab.history.writer import JOURNAL_SUFFIX, journal_to_parquet_arrows


def recover_journals(directory: str | os.PathLike[str]) -> list[Path]:
    """Turn journals left by writers that never closed (crash, SIGKILL) into Parquet parts: the
    Arrow IPC journals of :class:`HistoryWriter` and the workload driver's binary journals.

    Only call this once the run's processes are gone: a live writer's journal would be taken.
    Returns the Parquet files written; a journal that cannot be salvaged is a ``ValueError``.
    """
    written, problems = salvage_journals(directory)
    if problems:
        raise ValueError(problems[0])
    return written


def salvage_journals(directory: str | os.PathLike[str]) -> tuple[list[Path], list[str]]:
    """:func:`recover_journals`, going on past a journal that cannot be read (left in place): the
    Parquet files written, and one line for each journal that could not be."""
    written, problems = [], []
    journals = [(j, journal_to_parquet_arrows) for j in sorted(Path(directory).glob(f"*{JOURNAL_SUFFIX}"))]
    for path, convert in [*journals, *((base, journal_to_parquet) for base in journal_bases(directory))]:
        try:
            written.append(convert(path))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            problems.append(f"journal {path} cannot be turned into a history part ({why}): its events are not in the verdict")
    return written, problems


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
    the run's manifest, a journal its writer left, or a Parquet part with a history's columns
    (read from its footer); a folder whose sub-folders are histories (``scenario run --out``, a
    matrix) is named with them. Cheap: no row is read."""
    d = Path(directory)
    expected = "'pulsarlab workload run --out DIR' writes one"
    if not d.is_dir():
        siblings = sorted(p.name for p in d.parent.iterdir() if p.is_dir()) if d.parent.is_dir() else []
        near = difflib.get_close_matches(d.name, siblings, n=3, cutoff=0.6)
        what = "a file" if d.exists() else "nothing"
        hint = f"; did you mean {' or '.join(str(d.parent / n) for n in near)}?" if near else ""
        return f"no history folder {d}: {what} there, expected a run's history folder ({expected}){hint}"
    if (d / MANIFEST).is_file() or any(d.glob(f"*{JOURNAL_SUFFIX}")) or journal_bases(d):
        return None
    parts = part_files(d)
    if any(_has_history_columns(p) for p in parts):
        return None
    inside = sorted(p.name for p in d.iterdir() if look_inside and p.is_dir() and not_a_history(p, look_inside=False) is None)
    if inside:
        shown = ", ".join(inside[:5]) + (", ..." if len(inside) > 5 else "")
        return f"{d} holds histories in its folders ({shown}), not one of its own: give each folder, e.g. {d / inside[0]}"
    if parts:
        shown = ", ".join(p.name for p in parts[:3]) + (", ..." if len(parts) > 3 else "")
        return (f"{d} is not a run history: no {MANIFEST}, and its Parquet files ({shown}) are not history parts "
                f"(columns {', '.join(REQUIRED_COLUMNS)} and the rest of docs/history.md; {expected})")
    return f"{d} is not a run history: no history parts (*{PART_SUFFIX}), journal or {MANIFEST} in it ({expected})"


def _has_history_columns(path: Path) -> bool:
    try:
        names = pq.read_schema(path).names
    except (OSError, ValueError):  # not Parquet, or cut short
        return False
    return all(c in names for c in REQUIRED_COLUMNS)
