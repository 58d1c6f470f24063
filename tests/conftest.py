"""Shared test plumbing: tiers run in order (unit, cluster, scenario) and each tier's wall time is printed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

TIERS = ("unit", "cluster", "scenarios")
_spans: dict[str, list[float]] = {}
_counts: dict[str, int] = {}


def tier_of(item: pytest.Item) -> str:
    parts = Path(str(item.fspath)).parts
    for t in TIERS:
        if t in parts:
            return t
    return "unit"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # unit first; within the cluster tier, tests sharing a topology stay together
    def key(item: pytest.Item) -> tuple[int, int]:
        topo = next((i for i, name in enumerate(("smoke", "sync", "geo")) if name in item.fixturenames), 9)
        return TIERS.index(tier_of(item)), topo

    items.sort(key=key)
    for item in items:
        if tier_of(item) == "cluster":
            item.add_marker(pytest.mark.cluster)
        elif tier_of(item) == "scenarios":
            item.add_marker(pytest.mark.scenario)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    tier = tier_of(item)
    start = time.monotonic()
    yield
    span = _spans.setdefault(tier, [start, start])
    span[1] = time.monotonic()
    _counts[tier] = _counts.get(tier, 0) + 1


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    terminalreporter.section("wall time per tier")
    for t in TIERS:
        if t in _spans:
            a, b = _spans[t]
            terminalreporter.write_line(f"{t:9s} {_counts[t]:4d} tests  {b - a:7.1f} s")
        else:
            terminalreporter.write_line(f"{t:9s}    0 tests")
