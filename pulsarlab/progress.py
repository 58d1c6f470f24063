"""Progress of long work through one small interface, free of any display library.

``ops``, the runtimes, ``admin``, the workload and the verifier report what they are doing to a
:class:`Reporter`: a step begins (``begin``), its status or byte count moves (``update``), it ends
(``end``); a one-line note (``note``) is news that is no step. The base class reports nothing, so
library callers and tests pay nothing; the CLI hands in a rich display on a terminal
(:mod:`pulsarlab.cli.progress`). A ``Reporter`` is also a ``Say`` (called with a message it
notes it), so code that only says things keeps working; :func:`reporter_of` turns a plain ``Say``
(``print``, a logger) into a reporter that says each step's end as one line.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator


class Reporter:
    """Receives progress; this base class drops it (not a terminal, ``--quiet``, library use)."""

    def __call__(self, message: str) -> None:
        self.note(message)

    def note(self, message: str) -> None:
        """One line of news that is not a step."""

    def begin(self, key: str, label: str, status: str = "", total: float | None = None, unit: str = "") -> None:
        """A step starts: ``key`` names it for later calls, ``label`` is what a person reads;
        ``total`` (in ``unit``, e.g. ``"bytes"``) when its size is known."""

    def update(self, key: str, status: str | None = None, completed: float | None = None) -> None:
        """A step moves on: a new status word, or how much of it is done (in its unit)."""

    def end(self, key: str, status: str = "done", ok: bool = True) -> None:
        """A step is over; ``status`` says how (``ready (3.2s)``, ``failed``)."""

    @contextlib.contextmanager
    def step(self, key: str, label: str, status: str = "", done: str = "done") -> Iterator[None]:
        """Begin a step and end it as ``done`` with its elapsed seconds, or as failed if the block raises."""
        t0 = time.monotonic()
        self.begin(key, label, status)
        try:
            yield
        except BaseException:
            self.end(key, f"failed after {time.monotonic() - t0:.1f}s", ok=False)
            raise
        self.end(key, f"{done} ({time.monotonic() - t0:.1f}s)")


NO_PROGRESS = Reporter()


class SayReporter(Reporter):
    """A plain ``Say`` behind the reporter interface: notes as they come, a new status of a step as
    one line (``bk1 started (pid 42)``), and its end as one line (``bk1 ready (3.2s)``); how far a
    step is (``completed``) is left out."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.labels: dict[str, str] = {}

    def note(self, message: str) -> None:
        self.say(message)

    def begin(self, key: str, label: str, status: str = "", total: float | None = None, unit: str = "") -> None:
        self.labels[key] = label

    def update(self, key: str, status: str | None = None, completed: float | None = None) -> None:
        if status:
            self.say(f"{self.labels.get(key, key)} {status}")

    def end(self, key: str, status: str = "done", ok: bool = True) -> None:
        self.say(f"{self.labels.pop(key, key)} {status}")


def reporter_of(say: Callable[[str], None] | None) -> Reporter:
    """The reporter behind ``say``: itself if it is one, else a :class:`SayReporter` around it."""
    if say is None:
        return NO_PROGRESS
    return say if isinstance(say, Reporter) else SayReporter(say)


def human_bytes(n: float) -> str:
    """``253.4 MB``: decimal units, as download tools print them."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover - the loop always returns
