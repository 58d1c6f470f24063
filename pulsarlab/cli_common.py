"""What every ``pulsarlab`` command shares: its common options, its consoles, and how it fails: one
line on stderr (a JSON object on stdout with ``--json``), a documented exit code, and never a
traceback on the terminal (it goes to a log file named in the line)."""

from __future__ import annotations

import functools
import json
import tempfile
import time
import traceback
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from pulsarlab.errors import PulsarlabError
from pulsarlab.topology import BUILTINS

EXIT_CODES = """Exit codes: 0 success, 1 failure (a pulsarlab error or an unexpected one), 2 usage error
(a bad option value, a missing file), 130 interrupted."""
ERROR_LOG = Path(tempfile.gettempdir()) / "pulsarlab-error.log"

out = Console()
err = Console(stderr=True)

TopologyOpt = Annotated[str, typer.Option("--topology", "-t", help=f"built-in ({', '.join(BUILTINS)}) or a YAML file")]
StateDirOpt = Annotated[Path | None, typer.Option("--state-dir", help="default: .pulsarlab/<topology name>")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]


def width_needed(console: Console, table: Table) -> int:
    """The width at which ``table`` is not squeezed (a console that is no terminal says 80)."""
    return Measurement.get(console, console.options.update_width(4096), table).maximum


def print_whole(console: Console, table: Table) -> None:
    """Print ``table`` without cutting a cell, wider than the console if it must be (rich assumes
    80 columns when stdout is no terminal, and would cut long names)."""
    needed = width_needed(console, table)
    if needed <= console.width:
        console.print(table)
        return
    wide = Console(file=console.file, width=needed, force_terminal=console.is_terminal, no_color=console.no_color,
                   color_system="auto" if console.color_system else None)
    wide.print(table)


def log_traceback(exc: BaseException) -> Path | None:
    """Keep the full traceback of an unexpected error where the one-line report can point to it."""
    try:
        with open(ERROR_LOG, "a") as fh:
            fh.write(f"===== {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
            fh.write("".join(traceback.format_exception(exc)))
        return ERROR_LOG
    except OSError:
        return None


def fail(message: str, code: int, as_json: bool, kind: str, log: Path | None = None) -> typer.Exit:
    if as_json:
        print(json.dumps({"error": {"type": kind, "message": message, "exit_code": code,
                                    "log": str(log) if log else None}}, indent=2))
    line = message + (f" (traceback in {log})" if log else "")
    err.print(f"[bold red]error:[/] {line}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


def _command_line_exit(exc: BaseException) -> bool:
    """An exit or usage error of the command-line layer itself, left to it. Typer may bring its own
    copy of click, so these are known by their shape (an exit code and a way to show themselves)
    or their name, not by click's classes."""
    return isinstance(exc, typer.Exit | typer.Abort) or type(exc).__name__ in ("Exit", "Abort") or (
        hasattr(exc, "exit_code") and callable(getattr(exc, "show", None))
    )


def reported(fn):
    """Turn any error a command raises into one clear line and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        as_json = bool(kwargs.get("as_json"))
        try:
            return fn(*args, **kwargs)
        except PulsarlabError as exc:
            raise fail(str(exc), exc.exit_code, as_json, type(exc).__name__) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130, as_json, "KeyboardInterrupt") from None
        except Exception as exc:  # the promise is: no traceback on the terminal, ever
            if _command_line_exit(exc):
                raise
            log = log_traceback(exc)
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise fail(f"{type(exc).__name__}: {first}", 1, as_json, type(exc).__name__, log) from None

    return wrapper
