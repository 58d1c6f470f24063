"""``pulsarlab report DIR``: the HTML page of a run directory."""

from pathlib import Path
from typing import Annotated

import typer


def report_cmd(
    directories: Annotated[
        list[Path],
        typer.Argument(metavar="DIR", help="a run directory written by 'workload run' (or a scenario run); several: one "
                       "history; a folder of scenario runs ('scenario run --out DIR'): a page each and DIR/index.html"),
    ],
    out: Annotated[Path | None, typer.Option("--out", help="the page to write (default: DIR/report.html, the first DIR; "
                                             "DIR/index.html for a folder of scenario runs)")] = None,
    verdict: Annotated[
        Path | None,
        typer.Option(help="the verdict to show (default with one DIR: DIR/verdict.json, written by 'pulsarlab verify DIR')"),
    ] = None,
) -> None:
    """Write one self-contained HTML page: traffic and latency over time with the faults marked, and the verdict.

    On a folder of scenario runs (one scenario.json per sub-folder, no history of its own), each
    run's page beside its history and an index page with the verdict table on top, linking them.

    Exit code: 0 written (whatever the verdict says), 1 no history or an unreadable file in DIR (for
    a folder of runs: a run whose page could not be written, named in its row), 2 usage error.
    """
    from pulsarlab.errors import CheckFailed
    from pulsarlab.report import write_report
    from pulsarlab.report.index import is_runs_folder, write_index

    if len(directories) == 1 and verdict is None and is_runs_folder(directories[0]):
        index, rows = write_index(directories[0], out)
        print(index)
        if missing := [f"{r.name}: {r.problem}" for r in rows if r.problem]:
            raise CheckFailed(f"{len(missing)} run(s) without a page: " + "; ".join(missing))
        return
    print(write_report(directories, out, verdict))


def register(app: typer.Typer) -> None:
    app.command("report")(report_cmd)
