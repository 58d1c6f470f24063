"""``pulsarlab report DIR`` on a folder of scenario runs (``scenario run --out DIR``, ``--all``, a
matrix): each run's own page in its folder, and ``DIR/index.html`` with the verdict table on top,
one row a run, linking each page."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulsarlab.errors import UsageError
from pulsarlab.history.statuses import overall_status
from pulsarlab.report.page import environment, write_page, write_report
from pulsarlab.report.rundir import SCENARIO_FILE, ReportInputError, read_events_of, read_json

SKIPPED = "skipped"  # a run --on a deployment that could not do it (scenario.json's status): shown, not judged

INDEX_TEMPLATE = "index.html.j2"


@dataclass
class Row:
    name: str
    status: str
    control: bool
    rpo: int | None
    rto: float | None
    outage: float | None
    seconds: float | None
    page: str | None  # relative to the index
    why: str  # a skipped run's reason, or the first of a run's reasons
    problem: str | None = None  # why its page could not be written


def is_runs_folder(folder: Path) -> bool:
    """A folder of scenario runs, not a run: no history of its own, runs below it."""
    return folder.is_dir() and read_events_of(folder)[1] == 0 and bool(scenario_runs(folder))


def scenario_runs(folder: Path) -> list[Path]:
    """The run folders directly below ``folder`` (each with its ``scenario.json``), by name."""
    return sorted(d for d in folder.iterdir() if d.is_dir() and (d / SCENARIO_FILE).is_file())


def write_index(folder: Path, out: Path | None = None) -> tuple[Path, list[Row]]:
    """Each run's page (beside its history; none for a skipped run) and the index page (default
    ``folder/index.html``); the rows as the index shows them. A run whose page cannot be written is
    a row naming why, never left out."""
    runs = scenario_runs(folder)
    if not runs:
        raise UsageError(f"no scenario runs in {folder}: no sub-folder holds a {SCENARIO_FILE}")
    target = out if out is not None else folder / "index.html"
    rows = []
    for d in runs:
        data: dict[str, Any] = read_json(d / SCENARIO_FILE, dict)
        rto = data.get("rto") or {}
        row = Row(str(data.get("scenario") or d.name), str(data.get("status") or "?"), bool(data.get("control")),
                  data.get("rpo"), rto.get("max_recovery_s"), rto.get("max_outage_s"), data.get("seconds"), None,
                  str(data.get("skipped") or next(iter(data.get("reasons") or []), "")))
        if row.status != "skipped":
            try:
                row.page = os.path.relpath(write_report(d), target.parent)
            except (ReportInputError, UsageError) as exc:
                row.problem = f"no page: {exc}"
        rows.append(row)
    status = overall_status(r.status for r in rows if r.status != SKIPPED)
    html = environment().get_template(INDEX_TEMPLATE).render(
        folder=str(folder), rows=rows, status=status, generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    return write_page(target, html), rows
