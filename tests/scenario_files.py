"""Scenario files for tests: a built-in with its time bounds scaled as every wait is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pulsarlab import timeouts
from pulsarlab.scenarios.model import BUILTIN_DIR


def builtin(name: str) -> dict[str, Any]:
    """The built-in scenario ``name`` as data (for a test that changes a copy of it)."""
    return dict(yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text()))


def scaled_builtin(name: str, folder: Path, data: dict[str, Any] | None = None) -> Path:
    """The built-in scenario ``name`` (or ``data``, a changed copy of it) written into ``folder`` with
    each time bound of its ``expect`` (a key ending in ``_max_s``) multiplied by the timeout scale
    (``PULSARLAB_TIMEOUT_SCALE``: 2 when the test workers share the cores). A bound is what a user's
    design answers for on a machine of its own; under a load average of 40 a broker that starts again
    takes minutes to load a topic (seen: clients back on eu 170 s after its return, the bound 120 s).
    Counts (``rpo``, ``async_rpo_max``) and the checks stay as they are."""
    spec = data if data is not None else builtin(name)
    expect = spec.get("expect", {})
    for key, value in expect.items():
        if key.endswith("_max_s") and value is not None:
            expect[key] = round(value * timeouts.scale(), 3)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def bound(name: str, key: str) -> float:
    """The scaled value of the built-in's time bound ``key``, for a test's own assertion on it."""
    return float(builtin(name)["expect"][key]) * timeouts.scale()
