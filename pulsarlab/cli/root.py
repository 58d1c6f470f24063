"""The ``pulsarlab`` command: the root Typer app, and every command group registered on it once.

Each group lives in its own module (parse, call one function, print); how a command fails is
decided by the root group alone (:mod:`pulsarlab.cli.handler`)."""

from __future__ import annotations

import signal
import sys

import typer

from pulsarlab.cli import (
    chaos,
    cluster,
    compose,
    images,
    inspect,
    inventory,
    monitoring,
    report,
    scenario,
    security,
    tools,
    verify,
    workload,
)
from pulsarlab.cli.handler import EXIT_CODES, ReportingGroup

# plain click errors: a bad option value is one "Error: ..." line under the usage, not a drawn box
app = typer.Typer(cls=ReportingGroup, name="pulsarlab", no_args_is_help=True, rich_markup_mode=None,
                  help=f"Real Apache Pulsar clusters as code.\n\n{EXIT_CODES}")

for group in (cluster, chaos, workload, monitoring, compose, verify, inspect, inventory, images, tools, security, report,
              scenario):
    group.register(app)


def main() -> None:  # pragma: no cover - console entry
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    app()
    sys.exit(0)
