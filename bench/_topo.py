"""Built-in topologies for benchmarks: at another address range, with JVM settings changed."""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from pulsarlab.topology import BUILTIN_DIR
from pulsarlab.topology.model import JvmSettings


def topology_at(name: str, prefix: str, folder: Path, jvm: dict[str, object] | None = None) -> str:
    """The built-in topology ``name`` at ``prefix`` (127.N) with ``jvm`` settings applied; a file
    in ``folder``, or just the name when nothing changes."""
    if prefix == "127.0" and not jvm:
        return name
    data = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
    data["address_prefix"] = prefix
    if jvm:
        data["jvm"] = {**data.get("jvm", {}), **jvm}
    tag = "-".join(f"{k}-{v}" for k, v in sorted(jvm.items())) if jvm else "defaults"
    path = folder / f"{name}-{prefix}-{tag}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def jvm_setting(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` of the topology's ``jvm:`` section (VALUE read as YAML: false, 128)."""
    key, sep, value = text.partition("=")
    if not sep or key not in JvmSettings.model_fields:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY one of {', '.join(JvmSettings.model_fields)}")
    return key, yaml.safe_load(value)


def describe(jvm: dict[str, object]) -> str:
    return str(JvmSettings(**jvm).model_dump())
