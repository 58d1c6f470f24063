"""One self-contained HTML page for a run directory: plotly.js inline (works offline), the figures,
the verdict, the faults and the scenario's expectations, from a Jinja template beside this module."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import jinja2
from plotly.offline import get_plotlyjs

from pulsarlab.errors import UsageError
from pulsarlab.report import figures as figs
from pulsarlab.report.aggregate import NS, Aggregates, aggregate
from pulsarlab.report.rundir import RunDir, load

TEMPLATE: Final = "page.html.j2"
PASS_KEYS: Final = frozenset({"passed", "pass", "ok", "met"})
"""Columns whose true / false is shown as pass / FAIL."""
STATUS_KEYS: Final = frozenset({"status", "verdict", "verifier_status"})
"""Columns whose "pass" / "fail" / "inconclusive" is coloured."""


@dataclass
class Table:
    """A generic table for JSON the report shows as given (a scenario's verdict)."""

    title: str
    headers: list[str]
    rows: list[list[Any]]


def utc(ns: int | None) -> str:
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / NS, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def flatten(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, value in metrics.items():
        if isinstance(value, dict):
            out += flatten(value, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", value))
    return out


def json_tables(data: dict[str, Any], title: str = "") -> list[Table]:
    """A JSON object as tables: its scalars as one key/value table, each list of objects as a table,
    each object of objects (one row per key, e.g. RTO per producer) as a table, nested objects recursively."""
    scalars: list[list[Any]] = []
    out: list[Table] = []
    for key, value in data.items():
        name = f"{title}.{key}" if title else key
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            headers = list(dict.fromkeys(k for v in value for k in v))
            out.append(Table(name, headers, [[v.get(h) for h in headers] for v in value]))
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            headers = list(dict.fromkeys(k for v in value.values() for k in v))
            out.append(Table(name, ["", *headers], [[k, *[v.get(h) for h in headers]] for k, v in value.items()]))
        elif isinstance(value, dict) and value:
            out += json_tables(value, name)
        else:
            scalars.append([key, value])
    if scalars:
        out.insert(0, Table(title, ["", "value"], scalars))
    return out


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["cell"] = cell
    env.globals.update(PASS_KEYS=PASS_KEYS, STATUS_KEYS=STATUS_KEYS, utc=utc)
    return env


def render(run: RunDir, agg: Aggregates | None = None) -> str:
    """The page's HTML for a loaded run directory (or several)."""
    agg = agg or aggregate(run.events)
    faults = run.faults or []
    fig_html = {
        name: fig.to_html(full_html=False, include_plotlyjs=False, div_id=name,
                          config={"displaylogo": False, "responsive": True})
        for name, fig in figs.figures(agg, faults, run.verdict).items()
    }
    verdict = run.verdict
    return environment().get_template(TEMPLATE).render(
        run=run,
        manifests=run.manifests,
        title=" + ".join(m.run for m in run.manifests) or ", ".join(d.name for d in run.directories),
        dirs=" ".join(map(str, run.directories)),
        started=utc(agg.t0_ns),
        ended=utc(agg.end_ns),
        workload_started=utc(run.started_ns) if run.started_ns is not None else None,
        warmup_s=(agg.t0_ns - run.started_ns) / NS if run.started_ns is not None else None,
        scenario_status=[(d, data["status"]) for d, data in run.scenarios if isinstance(data.get("status"), str)],
        duration_s=(agg.end_ns - agg.t0_ns) / NS,
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        rows=run.events.num_rows,
        verdict=verdict,
        status=(verdict or {}).get("status", "missing"),
        metrics=flatten(verdict.get("metrics") or {}) if verdict else [],
        faults=[(f, figs.fault_x(f, agg.t0_ns)) for f in faults],
        faults_present=run.faults is not None,
        scenarios=[(d, json_tables(data)) for d, data in run.scenarios],
        figures=fig_html,
        plotlyjs=get_plotlyjs(),
    )


def write_report(
    directories: str | Path | Sequence[str | Path], out: str | Path | None = None, verdict: str | Path | None = None
) -> Path:
    """Write the report of a run directory, or several as one history (default: the first one's
    ``report.html``), and return its path."""
    dirs = [Path(directories)] if isinstance(directories, str | Path) else [Path(d) for d in directories]
    for d in dirs:
        if not d.is_dir():
            raise UsageError(f"no run directory: {d}")
    if not dirs:
        raise UsageError("no run directory given")
    target = Path(out) if out is not None else dirs[0] / "report.html"
    if target.is_dir():
        raise UsageError(f"--out is a directory: {target} (give a file name, e.g. {target / 'report.html'})")
    if not target.parent.is_dir():
        raise UsageError(f"no directory for the report: {target.parent}")
    return write_page(target, render(load(dirs, verdict)))


def write_page(target: Path, html: str) -> Path:
    """Write ``html`` to ``target`` whole: a reader never sees half a page."""
    partial = target.with_name(f".{target.name}.tmp")
    partial.write_text(html, encoding="utf-8")
    os.replace(partial, target)
    return target
