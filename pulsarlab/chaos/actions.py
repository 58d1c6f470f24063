"""The fault actions by name, and what running one leaves behind.

A fault is an action name and its arguments (``kill bk1-eu``, ``region-loss eu``...). Each action
takes a deployment that can act on its nodes and the fault's arguments, does the damage (or undoes
it), and returns what it did: one line for people and the nodes it acted on. The chaos modules
register their actions here when imported; importing :mod:`pulsarlab.chaos` registers them all.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.history.faults import APPLIED, HEALED, NodeWindow


@dataclass(frozen=True)
class Fault:
    """``action`` with ``args`` (node names or targets, regions...) at ``at`` seconds; a schedule
    waits ``timeout`` seconds (and some slack) for its action to return before giving up on it."""

    at: float
    action: str
    args: tuple[str, ...] = ()
    timeout: float = field(default=60.0, compare=False)

    def __str__(self) -> str:
        return " ".join((self.action, *self.args))

    @classmethod
    def parse(cls, text: str) -> Fault:
        """``AT ACTION ARGS...``, as ``workload run --fault`` takes it (``"10 kill bk1-eu"``)."""
        words = shlex.split(text)
        try:
            at = float(words[0]) if len(words) >= 2 else -1.0
        except ValueError:
            at = -1.0
        if at < 0:
            raise ValueError(f"fault {text!r}: expected 'AT ACTION ARGS...', AT in seconds (e.g. '10 kill bk1-eu')")
        return cls(at, words[1], tuple(words[2:]))


@dataclass(frozen=True)
class Done:
    """What one fault did: a line for people, and the nodes it acted on (none for a cut's heal)."""

    what: str
    nodes: tuple[str, ...] = ()
    at_ns: int | None = None  # when the damage took effect (the last node stopped); None: not a stop
    parts: tuple[NodeWindow, ...] = ()  # each node's window away, for an action that moves them one at a time


FaultAction = Callable[[NodeControl, tuple[str, ...]], Done]
"""``action(deployment, args) -> what was done``; raises on failure."""

Validator = Callable[[Endpoints, tuple[str, ...]], None]
"""Checks a fault's arguments before anything runs (the topology suffices); raises ``ValueError``
naming the problem."""

ACTIONS: dict[str, FaultAction] = {}
"""Every fault action by name (see :func:`register`)."""
VALIDATORS: dict[str, Validator] = {}
PHASES: dict[str, str] = {}
"""Per action: :data:`APPLIED` (it does damage) or :data:`HEALED` (it undoes some)."""


def register(name: str, action: FaultAction, validate: Validator, heals: bool = False) -> None:
    """Add a fault action under ``name``, the check of its arguments, and whether it heals."""
    ACTIONS[name] = action
    VALIDATORS[name] = validate
    PHASES[name] = HEALED if heals else APPLIED


def check(cluster: Endpoints, fault: Fault) -> None:
    """Raise ``ValueError`` if ``fault`` cannot run on ``cluster``: unknown action or bad arguments."""
    if fault.action not in ACTIONS:
        raise ValueError(f"unknown fault action {fault.action!r}: one of {', '.join(sorted(ACTIONS))}")
    try:
        VALIDATORS[fault.action](cluster, fault.args)
    except KeyError as exc:
        raise ValueError(f"fault {fault}: {exc.args[0] if exc.args else exc}") from None
    except ValueError as exc:
        raise ValueError(f"fault {fault}: {exc}") from None


def run_fault(cluster: NodeControl, fault: Fault) -> Done:
    """Run one fault now; returns what it did."""
    check(cluster, fault)
    return ACTIONS[fault.action](cluster, fault.args)
