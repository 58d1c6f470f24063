"""The ``pulsarlab`` command: the root Typer app, and every command group registered on it once.

Each group lives in its own module (parse, call one function, print); how a command fails is
decided by the root group alone (:mod:`pulsarlab.cli.handler`)."""

import sys
from typing import Annotated

import typer

from pulsarlab.cli import (
    chaos,
    cluster,
    compose,
    history,
    hosts,
    images,
    inspect,
    inventory,
    monitoring,
    report,
    scenario,
    security,
    tools,
    upgrade,
    verify,
    workload,
)
from pulsarlab.cli.handler import CLOSED_OUTPUT, EXIT_CODES, ReportingGroup, output_identity, output_reader_gone

# plain click errors: a bad option value is one "Error: ..." line under the usage, not a drawn box;
# -h beside --help on every command (click hands the names down to each subcommand's context)
app = typer.Typer(cls=ReportingGroup, name="pulsarlab", no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help=f"Real Apache Pulsar clusters as code.\n\n{EXIT_CODES}")


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import version

        from pulsarlab import settings

        print(f"pulsarlab {version('pulsarlab')} (Pulsar {settings.current().pulsar_version} unless told otherwise)")
        raise typer.Exit()


@app.callback()
def root(
    _: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                    help="print pulsarlab's version and the Pulsar release it runs by default")] = False,
) -> None:
    """Real Apache Pulsar clusters as code."""

for group in (cluster, chaos, workload, monitoring, compose, verify, history, inspect, inventory, hosts, images, tools, security,
              report, scenario, upgrade):
    group.register(app)


def main() -> None:  # pragma: no cover - console entry
    # SIGPIPE stays ignored (Python's default), so a write to a pipe without a reader raises where it
    # happens: with the signal's default action, a write to a child that had just exited (a workload
    # driver told to stop after a second Ctrl-C) killed the whole command. Output whose reader went
    # away (`pulsarlab ... | head`) ends the command quietly: Rich and Click see to that, each with
    # status 1, which here means a failed check; it becomes the status a shell gives a command that
    # the signal ended, as before.
    output = output_identity()
    try:
        app()
    except SystemExit as done:
        if done.code not in (0, None) and output_reader_gone(output):
            sys.exit(CLOSED_OUTPUT)
        raise
    sys.exit(0)
