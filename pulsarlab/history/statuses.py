"""The words a judgement of a history ends in, shared by the verifier, the scenarios and the
report: ``pass``, ``fail``, ``inconclusive``, and how several become one."""

from __future__ import annotations

from collections.abc import Iterable

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"


def overall_status(statuses: Iterable[str]) -> str:
    """Several verdicts as one: ``fail`` if any failed, ``pass`` if every one passed, else
    ``inconclusive`` (one was, or none was judged, or a status is unknown)."""
    states = set(statuses)
    return FAIL if FAIL in states else PASS if states == {PASS} else INCONCLUSIVE
