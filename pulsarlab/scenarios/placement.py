"""The ``placement: every_region`` expectation: when the run ends, every ledger of its topic (of
each partition) has a copy in every region of its cluster, read from the ledger metadata (write
sets included: each entry's copies, open and closed ledgers, re-replicated ones as they are now).

Read while the cluster is still up (before a fresh cluster goes down, or a running deployment's
faults are undone); judged with the other expectations. A ledger whose ensembles could be read
only from the broker (which may keep a stale copy), or a topic whose placement could not be read,
makes the expectation inconclusive, never a pass.
"""

from __future__ import annotations

from typing import Any

from pulsarlab.admin import placement
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import PulsarlabError
from pulsarlab.verify.model import FAIL, INCONCLUSIVE, PASS

EVERY_REGION = "every_region"
FROM_METADATA = "metadata store"


def read(cluster: Endpoints, topic: str, partitions: int = 0) -> dict[str, Any]:
    """Each ledger of the run's topic with the regions its copies are in, and what could not be read."""
    ledgers: list[dict[str, Any]] = []
    unread: list[str] = []
    for t in [f"{topic}-partition-{i}" for i in range(partitions)] or [topic]:
        try:
            report = placement.inspect(cluster, t)
        except PulsarlabError as exc:
            unread.append(f"{t}: its placement could not be read ({str(exc).splitlines()[0]})")
            continue
        for tp in report.topics:
            for led in tp.ledgers:
                ledgers.append({"topic": tp.topic, "ledger": led.ledger_id, "entries": led.entries,
                                "regions": led.regions, "missing_regions": led.missing_regions,
                                "ensembles_from": led.ensembles_from})
                if not led.ensembles_from.startswith(FROM_METADATA):
                    unread.append(f"{tp.topic}: ledger {led.ledger_id}'s ensembles came from {led.ensembles_from}")
    return {"ledgers": ledgers, "unread": unread}


def judged(seen: dict[str, Any] | None) -> tuple[str, str]:
    """(what was seen, pass | fail | inconclusive) for ``every_region``."""
    if seen is None:
        return "not read (the run ended before it could be)", INCONCLUSIVE
    without = [led for led in seen["ledgers"] if led["missing_regions"]]
    if without:
        return "; ".join(f"ledger {led['ledger']} has entries with no copy in {', '.join(led['missing_regions'])}"
                         for led in without), FAIL
    if seen["unread"] or not seen["ledgers"]:
        return "; ".join(seen["unread"]) or "the topic has no ledger", INCONCLUSIVE
    regions = sorted({r for led in seen["ledgers"] for r in led["regions"]})
    return f"{len(seen['ledgers'])} ledger(s), each entry in {', '.join(regions)}", PASS

