"""The tests' scaled copies of built-in scenarios: every time bound times the timeout scale, counts
and checks as they are, and still a scenario the product loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pulsarlab.scenarios.model import BUILTIN_DIR
from pulsarlab.scenarios.model import load as load_scenario
from tests.scenario_files import bound, scaled_builtin


@pytest.mark.parametrize("name", sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml")))
def test_a_scaled_builtin_multiplies_its_time_bounds_only(name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "2.5")
    original = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
    path = scaled_builtin(name, tmp_path)
    scaled = load_scenario(str(path))
    for key, value in original.get("expect", {}).items():
        got = getattr(scaled.expect, key)
        if key.endswith("_max_s"):
            assert got == pytest.approx(value * 2.5) and bound(name, key) == pytest.approx(value * 2.5), key
        elif key in ("rpo", "async_rpo_max", "outage_min_s"):
            assert got == value, key
    assert scaled.name == original["name"]  # its run folder keeps the built-in's name
