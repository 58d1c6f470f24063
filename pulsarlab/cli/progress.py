"""The terminal's side of :mod:`pulsarlab.progress`: a rich display of the steps on stderr.

Shown only when stderr is a terminal and ``--quiet`` is not given; otherwise commands get the
reporter that says nothing, so piped output and CI logs carry results only. Progress never goes to
stdout, so ``--json`` output stays one JSON document.
"""

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pulsarlab.cli.options import real
from pulsarlab.progress import NO_PROGRESS, Reporter

if TYPE_CHECKING:
    from rich.console import Console


@contextlib.contextmanager
def reporter(console: "Console", quiet: bool = False) -> Iterator[Reporter]:
    """The progress display for one command: rich on a terminal, nothing otherwise."""
    if quiet or not console.is_terminal:
        yield NO_PROGRESS
        return
    from pulsarlab.cli.rich_progress import RichReporter  # rich's display: only when there is one to show

    rich = RichReporter(real(console))
    rich.progress.start()
    try:
        yield rich
    finally:
        rich.close()
