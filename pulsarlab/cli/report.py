"""``pulsarlab report DIR``: the HTML page of a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_cmd(
    directories: Annotated[
        list[Path],
        typer.Argument(metavar="DIR", help="a run directory written by 'workload run' (or a scenario run); several: one history"),
    ],
    out: Annotated[Path | None, typer.Option("--out", help="the page to write (default: DIR/report.html, the first DIR)")] = None,
    verdict: Annotated[
        Path | None,
        typer.Option(help="the verdict to show (default with one DIR: DIR/verdict.json, written by 'pulsarlab verify DIR')"),
    ] = None,
) -> None:
    """Write one self-contained HTML page: traffic and latency over time with the faults marked, and the verdict.

    Exit code: 0 written (whatever the verdict says), 1 no history or an unreadable file in DIR, 2 usage error.
    """
    from pulsarlab.report import write_report

    print(write_report(directories, out, verdict))


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
