"""How every ``pulsarlab`` command fails, decided in one place: the root command group catches
what any command raises and turns it into one line on stderr (a JSON object on stdout with
``--json``, unless the command already printed its result there) and the exit code its class
carries (:mod:`pulsarlab.errors`). A traceback never reaches the terminal: it goes to a log file
named in the line."""

from __future__ import annotations

import json
import os
import select
import signal
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from pulsarlab import settings
from pulsarlab.cli.options import JSON_KEY, err
from pulsarlab.errors import CheckFailed, Inconclusive, PulsarlabError, UsageError

EXIT_CODES = f"""Exit codes: 0 success (what was checked holds), {CheckFailed.exit_code} a check failed, the cluster is
unhealthy or the work could not be done, {UsageError.exit_code} usage or bad input (nothing started),
{Inconclusive.exit_code} inconclusive (evidence missing or contradicting itself), 130 interrupted, 141 the reader
of the output went away."""
ERROR_LOG = Path(tempfile.gettempdir()) / "pulsarlab-error.log"
INTERRUPTED = 130


def log_traceback(exc: BaseException) -> Path | None:
    """Keep the full traceback of an unexpected error where the one-line report can point to it."""
    try:
        with open(ERROR_LOG, "a") as fh:
            fh.write(f"===== {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n")
            fh.write("".join(traceback.format_exception(exc)))
        return ERROR_LOG
    except OSError:
        return None


def _label(exc: BaseException) -> str:
    if isinstance(exc, Inconclusive):
        return "[bold yellow]inconclusive:[/]"
    return "[bold red]failed:[/]" if isinstance(exc, CheckFailed) else "[bold red]error:[/]"


def report(exc: BaseException, message: str, code: int, as_json: bool, log: Path | None = None) -> typer.Exit:
    """Print the one reason (and the JSON error object when asked for and no result was printed)."""
    if as_json and not getattr(exc, "result_shown", False):
        print(json.dumps({"error": {"type": type(exc).__name__, "message": message, "exit_code": code,
                                    "log": str(log) if log else None}}, indent=2))
    line = message + (f" (traceback in {log})" if log else "")
    # the label is markup; the message is text (a name, a path, a log line may hold [brackets])
    from rich.markup import escape

    err.print(f"{_label(exc)} {escape(line)}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code)


def _command_line_exit(exc: BaseException) -> bool:
    """An exit or usage error of the command-line layer itself, left to it. Typer may bring its own
    copy of click, so these are known by their shape (an exit code and a way to show themselves)
    or their name, not by click's classes."""
    return isinstance(exc, typer.Exit | typer.Abort) or type(exc).__name__ in ("Exit", "Abort") or (
        hasattr(exc, "exit_code") and callable(getattr(exc, "show", None))
    )


CLOSED_OUTPUT = 128 + signal.SIGPIPE


def output_reader_gone(started_on: tuple[int, int] | None = None) -> bool:
    """Whether standard output is a pipe whose reading end is closed (the kernel flags it as an
    error condition of the writing end), or was one and has since been pointed at the null device
    (what Rich does when it finds it so; ``started_on``: its device and inode at the start)."""
    try:
        now = os.fstat(1)
        if started_on is not None and (now.st_dev, now.st_ino) != started_on:
            null = os.stat(os.devnull)
            return (now.st_dev, now.st_ino) == (null.st_dev, null.st_ino)
        poller = select.poll()
        poller.register(1, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError):
        return False


def output_identity() -> tuple[int, int] | None:
    """Standard output's device and inode, for :func:`output_reader_gone` (None if there is none)."""
    try:
        st = os.fstat(1)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class ReportingGroup(TyperGroup):
    """The root group: every subcommand runs inside its ``invoke``, so this is the one handler."""

    def invoke(self, ctx: Any) -> Any:  # a click Context of whichever click typer brings
        try:
            settings.current().check()  # a bad setting is bad input: said before anything starts
            return super().invoke(ctx)
        except PulsarlabError as exc:
            raise report(exc, str(exc), exc.exit_code, ctx.meta.get(JSON_KEY, False)) from None
        except KeyboardInterrupt as exc:
            raise report(exc, "interrupted", INTERRUPTED, ctx.meta.get(JSON_KEY, False)) from None
        except Exception as exc:  # the promise is: no traceback on the terminal, ever
            if _command_line_exit(exc):
                raise
            if isinstance(exc, BrokenPipeError) and output_reader_gone():
                # `pulsarlab ... | head`: nothing more is written, and the status is the one a
                # shell gives a command that the signal for it ended
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
                raise SystemExit(CLOSED_OUTPUT) from None
            log = log_traceback(exc)
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise report(exc, f"{type(exc).__name__}: {first}", 1, ctx.meta.get(JSON_KEY, False), log) from None


def exit_with(status: str, failed: str, reasons: list[str]) -> None:
    """After a verdict was printed: return on a pass, else raise what its status means (the reason
    of a failure, or why the evidence does not decide)."""
    from pulsarlab.verify.model import FAIL, INCONCLUSIVE

    if status == FAIL:
        raise CheckFailed(failed, result_shown=True)
    if status == INCONCLUSIVE:
        raise Inconclusive("; ".join(reasons) or "the evidence does not decide", result_shown=True)
