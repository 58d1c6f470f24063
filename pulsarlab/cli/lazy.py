"""Modules the CLI loads on first use, not at its start.

``pulsarlab --help`` or ``pulsarlab down`` need neither pyarrow, pandas nor Spark; importing the
orchestration layer eagerly cost every command about a second of start. A command module names
what it calls as ``ops = lazy.module("pulsarlab.ops")`` (with the real import under
``TYPE_CHECKING`` for the type checker): the module is imported the first time one of its names
is read, so a command pays only for what it runs.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def module(name: str) -> ModuleType:
    """``name`` as a module object that imports itself on first attribute access (the module
    itself when something imported it already)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    loader.exec_module(mod)
    return mod
