"""What every ``pulsarlab`` command shares: its common options and its two consoles (results on
stdout, everything else on stderr)."""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from pulsarlab.topology import BUILTINS

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

PIPED_WIDTH = 4096  # rich assumes 80 columns when its stream is no terminal and would wrap there


def _console(stderr: bool = False) -> "Console":
    """A console that sizes itself to the terminal; into a pipe or a file, lines as long as they are."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else PIPED_WIDTH)


class _OnFirstUse:
    """A console made the first time something of it is read: rich costs a third of the CLI's
    start, which ``--help`` and a usage error would pay for nothing."""

    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def resolved(self) -> "Console":
        if self._console is None:
            self._console = _console(self._stderr)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.resolved(), name)


def real(console: "Console") -> "Console":
    """The console itself, made now if it was waiting for its first use: what hands it to rich
    (a live display enters it as a context, which no stand-in's attribute lookup answers)."""
    return console.resolved() if isinstance(console, _OnFirstUse) else console


out = cast("Console", _OnFirstUse(stderr=False))
err = cast("Console", _OnFirstUse(stderr=True))


JSON_KEY = "as_json"  # where --json leaves its value for the handler (click's ctx.meta, shared by nested commands)


def remember_json(ctx: typer.Context, value: bool) -> bool:
    """The ``--json`` option's callback: the handler must know it even once the command is gone."""
    ctx.meta[JSON_KEY] = value
    return value


TopologyOpt = Annotated[str, typer.Option("--topology", "-t", help=f"built-in ({', '.join(BUILTINS)}) or a YAML file")]
StateDirOpt = Annotated[
    Path | None, typer.Option("--state-dir", help="default: $PULSARLAB_STATE_DIR, else .pulsarlab/<topology name>")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output", callback=remember_json)]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="no progress display (there is none when stderr is not a terminal)")
]
ImageOpt = Annotated[
    str | None,
    typer.Option(help="docker runtime: the Pulsar image, e.g. apachepulsar/pulsar:4.0.8 (default: 'pulsarlab image build')"),
]


def new_table(*columns: str, **options: Any) -> "Table":
    """A rich table: rich is loaded by the commands that print one, not at the CLI's start."""
    from rich.table import Table

    return Table(*columns, **options)


def cell(value: Any) -> str:
    """One value in a table cell: '-' for nothing, JSON for a structure."""
    return "-" if value is None else (json.dumps(value) if isinstance(value, dict | list) else str(value))


def width_needed(console: "Console", table: "Table") -> int:
    """The width at which ``table`` is not squeezed (a console that is no terminal says 80)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update_width(4096), table).maximum


def print_whole(console: "Console", table: "Table") -> None:
    """Print ``table`` without cutting a cell, wider than the console if it must be (rich assumes
    80 columns when stdout is no terminal, and would cut long names)."""
    console = real(console)
    needed = width_needed(console, table)
    if needed <= console.width:
        console.print(table)
        return
    from rich.console import Console

    wide = Console(file=console.file, width=needed, force_terminal=console.is_terminal, no_color=console.no_color,
                   color_system="auto" if console.color_system else None)
    wide.print(table)
