"""Topology files for tests: a built-in moved to an address range of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pulsarlab.topology import BUILTIN_DIR


def builtin_at(name: str, address_prefix: str, folder: Path, **fields: Any) -> Path:
    """The built-in topology ``name`` with ``address_prefix`` (``127.<n>``) and any other top-level
    ``fields`` (such as ``security``), written into ``folder``."""
    data = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
    path = folder / f"{name}-{address_prefix}{'-' + '-'.join(sorted(fields)) if fields else ''}.yaml"
    path.write_text(yaml.safe_dump({**data, "address_prefix": address_prefix, **fields}))
    return path
