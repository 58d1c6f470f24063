"""A run's id, its manifest ``_run.json`` (the format is in ``docs/history.md``) and the name of
the verdict the verifier writes beside them.

``workload run`` writes the manifest when the run starts (``finished`` false) and rewrites it as
drivers come and go and when the run ends, so a manifest left unfinished says the run itself died.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

MANIFEST = "_run.json"
VERDICT_FILE = "verdict.json"  # written into a single run's directory by the verifier; the report reads it
FORMAT = 1


def new_run_id() -> str:
    """``r<yyyymmdd>-<hhmmss>-<4 hex>`` in UTC: sorts by start time, and two runs in one second differ."""
    return time.strftime("r%Y%m%d-%H%M%S", time.gmtime()) + f"-{secrets.token_hex(2)}"


@dataclass
class DriverOutcome:
    """How one driver process ended; ``failed`` with a one-line ``reason`` makes the run's verdict inconclusive."""

    name: str
    mode: str  # produce | consume | read
    part: str
    exit_code: int | None = None  # None while running, or when it never started
    failed: bool = False
    reason: str | None = None
    # the driver's own final tally (invoked, acked, failed, unknown, received, stored), recorded when
    # it exited 0; the verifier checks its part against it (None: not known, e.g. older manifests)
    counts: dict[str, int] | None = None


@dataclass
class Manifest:
    run: str
    topic: str
    partitions: int
    cluster: str
    read_clusters: list[str]
    subscription: str
    started_ts: int = field(default_factory=time.time_ns)
    ended_ts: int | None = None
    finished: bool = False
    drivers: list[DriverOutcome] = field(default_factory=list)
    consume_cluster: str | None = None  # where the consumers connected (None in older manifests: ``cluster``)
    replication: dict[str, list[str]] = field(default_factory=dict)  # base topic -> clusters it replicates to
    ended_early: str | None = None  # why the send phase ended before its duration (Ctrl-C, asked by a caller)

    def write(self, directory: Path) -> Path:
        """Write (or rewrite) ``_run.json`` atomically: a reader never sees half a manifest."""
        target = directory / MANIFEST
        partial = directory / f".{MANIFEST}.tmp"
        partial.write_text(json.dumps({"format": FORMAT, **asdict(self)}, indent=1) + "\n")
        os.replace(partial, target)
        return target


MODES = ("produce", "consume", "read")
_FIELDS: dict[str, type] = {"run": str, "topic": str, "partitions": int, "finished": bool, "drivers": list}
_DRIVER_FIELDS: dict[str, type] = {"name": str, "mode": str, "part": str}


def manifest_problems(data: object) -> list[str]:
    """How a manifest read from JSON differs from the format written here: a format this version
    does not know, a field missing or of another type, a driver's counts that are not numbers.
    Empty when it can be believed."""
    if not isinstance(data, dict):
        return [f"a JSON {type(data).__name__}, not an object"]
    if data.get("format") != FORMAT:
        return [f"format {data.get('format')!r}, this version reads format {FORMAT}"]
    problems = [f"{name!r} is {type(data[name]).__name__}, not {kind.__name__}"
                for name, kind in _FIELDS.items() if name in data and not _is(data[name], kind)]
    problems += [f"no {name!r}" for name in ("run", "drivers") if name not in data]
    drivers = data.get("drivers")
    for i, d in enumerate(drivers if isinstance(drivers, list) else []):
        if not isinstance(d, dict) or any(not _is(d.get(k), t) for k, t in _DRIVER_FIELDS.items()):
            problems.append(f"driver {i} lacks a name, mode or part")
        elif d["mode"] not in MODES:
            problems.append(f"driver {d['name']} has mode {d['mode']!r}, not one of {', '.join(MODES)}")
        elif d.get("counts") is not None and not (
            isinstance(d["counts"], dict) and all(_is(v, int) and v >= 0 for v in d["counts"].values())
        ):
            problems.append(f"driver {d['name']} has counts that are not whole numbers: {d['counts']!r}")
    return problems


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))


def read_manifest(directory: Path) -> Manifest | None:
    """The manifest of a run directory, or None when it has none."""
    path = directory / MANIFEST
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    data.pop("format", None)
    drivers = [DriverOutcome(**d) for d in data.pop("drivers", [])]
    return Manifest(**data, drivers=drivers)
