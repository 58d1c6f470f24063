"""The settings a Pulsar release knows, read from its distribution, and a topology's ``config``
sections checked against them (see :mod:`.catalog` and :mod:`.check`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pulsarlab.errors import TopologyError
from pulsarlab.settings_catalog.catalog import Catalog, load
from pulsarlab.settings_catalog.check import OWNED, all_levels, check
from pulsarlab.topology import Topology
from pulsarlab.topology.settings import has_settings

__all__ = ["OWNED", "Catalog", "check", "check_topology", "load", "needs_catalog"]


def needs_catalog(topo: Topology) -> bool:
    """The topology sets server settings of its own (``config`` or ``jvm_options`` anywhere)."""
    return has_settings(all_levels(topo))


def check_topology(topo: Topology, home: Path, version: str, warn: Callable[[str], None]) -> None:
    """Check ``topo``'s settings against the distribution at ``home``: each warning to ``warn``,
    then one TopologyError naming every problem. Nothing to read when the topology sets none."""
    if not needs_catalog(topo):
        return
    problems, warnings = check(topo, load(home, version))
    for text in warnings:
        warn(text)
    if problems:
        raise TopologyError.of(problems)
