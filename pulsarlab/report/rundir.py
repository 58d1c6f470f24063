"""What a report reads from a run directory: the events it plots (only the columns it needs), the
manifest, the verdict, and the faults and scenario verdict a scenario runner leaves beside them.

Nothing here writes into the directory: a journal left by a driver that is still running (or that
died) is read where it is, not converted, so a report never takes a live writer's journal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.errors import PulsarlabError, UsageError
from pulsarlab.history import JOURNAL_SUFFIX, SCHEMA, part_files, read_journal
from pulsarlab.history.journal import journal_bases, read_events
from pulsarlab.verify.job import VERDICT_FILE
from pulsarlab.workload.manifest import MANIFEST, Manifest, read_manifest

FAULTS_FILE: Final = "faults.json"
SCENARIO_FILE: Final = "scenario.json"
COLUMNS: Final[tuple[str, ...]] = ("op", "type", "producer", "seq", "cluster", "ts", "publish_ts")
"""The history columns a report uses."""
PLOTTED_OPS: Final[tuple[str, ...]] = ("send", "receive", "ack")
"""Events that happen while the workload runs (reads and scans come after it, subscribes before)."""


class ReportInputError(PulsarlabError):
    """A run directory lacks what a report needs, or holds a file that cannot be read."""


@dataclass(frozen=True)
class FaultMark:
    """One fault as a scenario runner recorded it."""

    fault: str
    at_s: float | None = None
    wall_ns: int | None = None
    done: str | None = None


@dataclass
class RunDir:
    """Everything a report shows about one run directory."""

    directory: Path
    events: pa.Table
    manifest: Manifest | None
    verdict: dict[str, Any] | None
    verdict_path: Path
    verdict_warnings: list[str] = field(default_factory=list)
    faults: list[FaultMark] | None = None
    scenario: dict[str, Any] | None = None
    sources: int = 0  # Parquet parts and journals read


def load(directory: str | Path, verdict_path: str | Path | None = None) -> RunDir:
    """Read a run directory; ``verdict_path`` overrides ``DIR/verdict.json``."""
    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"no run directory: {d}")
    events, sources = read_events_of(d)
    if sources == 0:
        raise ReportInputError(
            f"no history in {d}: no Parquet parts or driver journals (write one with: pulsarlab workload run --out {d})"
        )
    if events.num_rows == 0:
        raise ReportInputError(f"nothing to plot in {d}: its history has no send, receive or ack events")
    try:
        manifest = read_manifest(d)
    except (ValueError, TypeError) as exc:
        raise ReportInputError(f"unreadable manifest {d / MANIFEST}: {exc}") from None
    vpath = Path(verdict_path) if verdict_path is not None else d / VERDICT_FILE
    if verdict_path is not None and not vpath.is_file():
        raise UsageError(f"no verdict file: {vpath}")
    verdict = _json(vpath, dict) if vpath.is_file() else None
    run = RunDir(d, events, manifest, verdict, vpath, sources=sources)
    if verdict is not None:
        run.verdict_warnings = _verdict_warnings(d, vpath, verdict)
    if (d / FAULTS_FILE).is_file():
        run.faults = _faults(d / FAULTS_FILE)
    if (d / SCENARIO_FILE).is_file():
        run.scenario = _json(d / SCENARIO_FILE, dict)
    return run


def read_events_of(directory: Path) -> tuple[pa.Table, int]:
    """The send, receive and ack rows of every part and journal (read in place), and how many sources there were."""
    wanted = pa.schema([SCHEMA.field(c) for c in COLUMNS])
    tables = []
    parts = part_files(directory)
    for p in parts:
        tables.append(pq.read_table(p, schema=SCHEMA, columns=list(COLUMNS), filters=[("op", "in", PLOTTED_OPS)]))
    done = {p.stem for p in parts}  # a journal whose part exists was converted; its removal was pending
    journals = [j for j in sorted(directory.glob(f"*{JOURNAL_SUFFIX}")) if j.stem not in done]
    bases = [b for b in journal_bases(directory) if b.name not in done]
    for t in [read_journal(j) for j in journals] + [read_events(b) for b in bases]:
        t = t.select(list(COLUMNS))
        tables.append(t.filter(pc.is_in(t["op"], pa.array(PLOTTED_OPS))))
    sources = len(parts) + len(journals) + len(bases)
    events = pa.concat_tables([t.cast(wanted) for t in tables]) if tables else wanted.empty_table()
    return events, sources


def _json(path: Path, kind: type) -> Any:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReportInputError(f"unreadable {path}: {exc}") from None
    if not isinstance(data, kind):
        raise ReportInputError(f"unreadable {path}: expected a JSON {'object' if kind is dict else 'list'}")
    return data


def _faults(path: Path) -> list[FaultMark]:
    out = []
    for i, item in enumerate(_json(path, list)):
        if not isinstance(item, dict) or not isinstance(item.get("fault"), str):
            raise ReportInputError(f"unreadable {path}: entry {i} has no 'fault' text")
        at, wall = item.get("at_s"), item.get("wall_ns")
        if at is None and wall is None:
            raise ReportInputError(f"unreadable {path}: entry {i} ({item['fault']}) has neither 'at_s' nor 'wall_ns'")
        try:
            out.append(FaultMark(item["fault"], None if at is None else float(at), None if wall is None else int(wall),
                                 None if item.get("done") is None else str(item["done"])))
        except (TypeError, ValueError) as exc:
            raise ReportInputError(f"unreadable {path}: entry {i}: {exc}") from None
    return out


def _verdict_warnings(directory: Path, vpath: Path, verdict: dict[str, Any]) -> list[str]:
    """Reasons to doubt that this verdict speaks for this history."""
    warnings = []
    if "status" not in verdict or "checks" not in verdict:
        raise ReportInputError(f"unreadable {vpath}: not a verdict (no 'status' or 'checks'; written by pulsarlab verify --out?)")
    judged = [Path(p).resolve() for p in verdict.get("directories", [])]
    if judged and directory.resolve() not in judged:
        warnings.append(f"this verdict judged {', '.join(map(str, judged))}, not {directory}")
    elif len(judged) > 1:
        warnings.append(f"this verdict judged {len(judged)} directories as one history: {', '.join(map(str, judged))}")
    newest = max((p.stat().st_mtime for p in part_files(directory)), default=0.0)
    if newest > vpath.stat().st_mtime:
        warnings.append(f"{vpath.name} is older than the history: it may not judge the history plotted here")
    return warnings
