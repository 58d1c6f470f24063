"""Children that a test interrupts with SIGINT (a user's Ctrl-C) are started as a terminal starts
them: with SIGINT at its default."""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """For ``subprocess.Popen(preexec_fn=...)``. A test run that a shell without job control started
    in the background (``cmd &``) ignores SIGINT, and its children inherit that; a Python child that
    starts with SIGINT ignored never turns it into KeyboardInterrupt, so a Ctrl-C test would wait
    for an end that never comes (seen: the unit tier run that way, ``logs -f`` never ended)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
