"""The verdict as a person reads it: instants as UTC times, durations with their unit, metric names
whole. ``verdict.json`` and ``--json`` keep the raw values (instants in nanoseconds since the epoch)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from rich.table import Table


class ShownCheck(Protocol):
    name: str
    count: int
    examples: list[dict[str, Any]]

    @property
    def passed(self) -> bool: ...


class Shown(Protocol):
    """What a verdict shows (``pulsarlab.verify.model.Verdict`` is one): this module does not
    import the model, which renders itself through it."""

    reasons: list[str]

    @property  # read-only: a verdict's list of its own Check type is such a sequence
    def checks(self) -> Sequence[ShownCheck]: ...

    @property
    def metrics(self) -> Mapping[str, Any]: ...

    @property
    def status(self) -> str: ...

    @property
    def directory(self) -> str: ...


def utc_time(ns: int) -> str:
    """``2027-01-15T08:00:00.503Z`` from nanoseconds since the epoch (ISO 8601, UTC, milliseconds)."""
    t = dt.datetime.fromtimestamp(ns // 1_000_000 / 1000, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def shown_value(name: str, value: Any) -> str:
    """One value by its name: ``*_ts`` an instant, ``*_ms`` / ``*_s`` (or ``seconds``) a duration,
    ``count`` and integers with thousands separators."""
    if value is None:
        return "-"
    parts = name.split(".")
    leaf = parts[-1]
    if isinstance(value, int) and not isinstance(value, bool) and leaf.endswith("_ts"):
        return utc_time(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        # a percentile under ``publish_latency_ms`` is in ms: the unit is the group's
        if leaf != "count" and any(p.endswith("_ms") for p in parts):
            return f"{value:,.3f} ms"
        if leaf.endswith("_per_s"):
            return f"{value:,.1f} /s"
        if leaf == "seconds" or leaf.endswith("_s"):
            return f"{value:,.3f} s"
        return f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"
    return str(value)


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for name, value in metrics.items():
        if isinstance(value, Mapping):
            yield from flatten(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def example_line(example: Mapping[str, Any]) -> str:
    """``producer=p0 seq=5 ok_ts=2027-01-15T08:00:00.503Z``: every field, instants as times."""
    return " ".join(f"{k}={shown_value(k, v)}" for k, v in sorted(example.items()))


def table(verdict: Shown) -> Table:
    """Checks, then the headline metrics."""
    t = Table(title=f"verdict: {verdict.status.upper()}  ({verdict.directory})")
    t.add_column("check / metric", no_wrap=True)
    t.add_column("value", justify="right", no_wrap=True)
    t.add_column("status", no_wrap=True)
    for c in verdict.checks:
        status = "[green]ok[/]" if c.count == 0 else ("[yellow]allowed[/]" if c.passed else "[red]FAIL[/]")
        t.add_row(c.name, f"{c.count:,}", status)
    t.add_section()
    for name, value in flatten(verdict.metrics):
        t.add_row(name, shown_value(name, value), "")
    if verdict.reasons:
        t.caption = "inconclusive evidence:\n" + "\n".join(f"- {r}" for r in verdict.reasons)
    return t


def example_lines(verdict: Shown) -> list[str]:
    """Each check with anomalies: its first example, one line (below the table, so the table stays narrow)."""
    return [f"{c.name}, first example: {example_line(c.examples[0])}" for c in verdict.checks if c.examples]
