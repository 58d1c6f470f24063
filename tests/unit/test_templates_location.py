"""templates/ sits at the top of the repository and is the wheel's ``pulsarlab/templates`` package
data (tests/cluster/test_install.py renders from an installed wheel; this checks the checkout)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pulsarlab import render

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_renders_from_the_top_level_templates() -> None:
    assert render.TEMPLATES_DIR == REPO / "templates"
    assert not (REPO / "pulsarlab" / "templates").exists()


def test_the_wheel_maps_every_template_into_the_package() -> None:
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["package-dir"]["pulsarlab.templates"] == "templates"
    assert tool["package-data"]["pulsarlab.templates"] == ["*.j2"]
    shipped = list((REPO / "templates").iterdir())
    assert "broker.conf.j2" in {p.name for p in shipped} and all(p.suffix == ".j2" for p in shipped)
    assert '"pulsarlab.templates"' in (REPO / "setup.py").read_text()
