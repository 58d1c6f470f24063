"""What a report reads from a run directory: the events it plots (only the columns it needs), the
faults of the history (``faults.parquet``), the manifest, the verdict, and the scenario verdict a
scenario runner leaves beside them.

Nothing here writes into the directory: a journal left by a driver that is still running (or that
died) is read where it is, not converted, so a report never takes a live writer's journal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pulsarlab.errors import PulsarlabError, UsageError
from pulsarlab.history import JOURNAL_SUFFIX, SCHEMA, part_files, read_journal
from pulsarlab.history.faults import FAULTS_FILE, FaultRow, read_faults
from pulsarlab.history.journal import journal_bases, read_events
from pulsarlab.history.manifest import MANIFEST, VERDICT_FILE, Manifest, read_manifest

SCENARIO_FILE: Final = "scenario.json"
COLUMNS: Final[tuple[str, ...]] = ("op", "type", "producer", "seq", "cluster", "ts", "publish_ts")
"""The history columns a report uses."""
PLOTTED_OPS: Final[tuple[str, ...]] = ("send", "receive", "ack")
"""Events that happen while the workload runs (reads and scans come after it, subscribes before)."""


class ReportInputError(PulsarlabError):
    """A run directory lacks what a report needs, or holds a file that cannot be read."""


@dataclass
class RunDir:
    """Everything a report shows about a run directory, or several judged as one history."""

    directories: list[Path]
    events: pa.Table
    manifests: list[Manifest]
    verdict: dict[str, Any] | None
    verdict_path: Path | None
    verdict_warnings: list[str] = field(default_factory=list)
    faults: list[FaultRow] | None = None  # None: the history has no faults part (a run without a schedule)
    scenarios: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    sources: int = 0  # Parquet parts (the faults part too) and journals read

    @property
    def fault_errors(self) -> list[str]:
        """The faults whose action failed, one line each."""
        return [f"{f.fault} at {f.offset_s:.1f}s: {f.error_line}" for f in self.faults or [] if not f.ok]

    @property
    def directory(self) -> Path:
        return self.directories[0]

    @property
    def started_ns(self) -> int | None:
        """When the first run started, by its manifest."""
        return min((m.started_ts for m in self.manifests), default=None)


def load(directories: str | Path | Sequence[str | Path], verdict_path: str | Path | None = None) -> RunDir:
    """Read one run directory, or several as one history (as ``pulsarlab verify`` judges them);
    ``verdict_path`` overrides ``DIR/verdict.json`` (with several directories there is no default)."""
    dirs = [Path(directories)] if isinstance(directories, str | Path) else [Path(d) for d in directories]
    if not dirs:
        raise UsageError("no run directory given")
    tables, sources, manifests = [], 0, []
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"no run directory: {d}")
        events, found = read_events_of(d)
        if found == 0:
            raise ReportInputError(
                f"no history in {d}: no Parquet parts or driver journals (write one with: pulsarlab workload run --out {d})"
            )
        tables.append(events)
        sources += found
        try:
            manifest = read_manifest(d)
        except (ValueError, TypeError) as exc:
            raise ReportInputError(f"unreadable manifest {d / MANIFEST}: {exc}") from None
        if manifest is not None:
            manifests.append(manifest)
    events = pa.concat_tables(tables)
    if events.num_rows == 0:
        raise ReportInputError(f"nothing to plot in {', '.join(map(str, dirs))}: no send, receive or ack events")
    vpath = Path(verdict_path) if verdict_path is not None else (dirs[0] / VERDICT_FILE if len(dirs) == 1 else None)
    if verdict_path is not None and vpath is not None and not vpath.is_file():
        raise UsageError(f"no verdict file: {vpath}")
    verdict = read_json(vpath, dict) if vpath is not None and vpath.is_file() else None
    run = RunDir(dirs, events, manifests, verdict, vpath, sources=sources)
    if verdict is not None and vpath is not None:
        run.verdict_warnings = _verdict_warnings(dirs, vpath, verdict)
    for d in dirs:
        try:
            faults = read_faults(d)
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise ReportInputError(f"unreadable {d / FAULTS_FILE}: {exc}") from None
        if faults is not None:
            run.faults = (run.faults or []) + faults
            run.sources += 1
        if (d / SCENARIO_FILE).is_file():
            run.scenarios.append((d, read_json(d / SCENARIO_FILE, dict)))
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


def read_json(path: Path, kind: type | tuple[type, ...]) -> Any:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ReportInputError(f"unreadable {path}: {exc}") from None
    if not isinstance(data, kind):
        raise ReportInputError(f"unreadable {path}: expected a JSON {'object' if kind is dict else 'list'}")
    return data


def _verdict_warnings(directories: list[Path], vpath: Path, verdict: dict[str, Any]) -> list[str]:
    """Reasons to doubt that this verdict speaks for the history plotted."""
    warnings = []
    if "status" not in verdict or "checks" not in verdict:
        raise ReportInputError(f"unreadable {vpath}: not a verdict (no 'status' or 'checks'; written by pulsarlab verify --out?)")
    judged = {Path(p).resolve() for p in verdict.get("directories", [])}
    plotted = {d.resolve() for d in directories}
    if judged and judged != plotted:
        warnings.append(f"this verdict judged {', '.join(map(str, sorted(judged)))}, not {', '.join(map(str, directories))}")
    newest = max((p.stat().st_mtime for d in directories for p in part_files(d)), default=0.0)
    if newest > vpath.stat().st_mtime:
        warnings.append(f"{vpath.name} is older than the history: it may not judge the history plotted here")
    return warnings
