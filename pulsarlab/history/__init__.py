"""The run history: the Jepsen-style event table a workload writes and the verifier reads.

- :mod:`.schema`: the columns, ops and part files (``docs/history.md`` is the public description);
- :mod:`.writer`: :class:`HistoryWriter`, an Arrow IPC journal for Python code of one's own;
- :mod:`.journal`: the workload driver's binary journal and its conversion;
- :mod:`.folders`: a whole history folder (journals salvaged, parts read, a folder told apart).

A journal left behind by a process that died is salvaged by :func:`recover_journals`, which
:func:`read_history` and the verifier run first.

The names below load their module (and Arrow with it) on first use: a command that only needs a
light part of the package (the manifest, the faults' rows, the files' names) starts without Arrow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulsarlab.history.folders import not_a_history, read_history, recover_journals, salvage_journals
    from pulsarlab.history.schema import (
        ACK_TYPES,
        COLUMNS,
        OPS,
        PART_SUFFIX,
        SCHEMA,
        SEND_TYPES,
        conform,
        part_files,
        write_table,
    )
    from pulsarlab.history.writer import JOURNAL_SUFFIX, HistoryWriter, read_journal

_WHERE = {
    **dict.fromkeys(("not_a_history", "read_history", "recover_journals", "salvage_journals"), "folders"),
    **dict.fromkeys(("ACK_TYPES", "COLUMNS", "OPS", "PART_SUFFIX", "SCHEMA", "SEND_TYPES", "conform", "part_files",
                     "write_table"), "schema"),
    **dict.fromkeys(("JOURNAL_SUFFIX", "HistoryWriter", "read_journal"), "writer"),
}
__all__ = [
    "ACK_TYPES",
    "COLUMNS",
    "JOURNAL_SUFFIX",
    "OPS",
    "PART_SUFFIX",
    "SCHEMA",
    "SEND_TYPES",
    "HistoryWriter",
    "conform",
    "not_a_history",
    "part_files",
    "read_history",
    "read_journal",
    "recover_journals",
    "salvage_journals",
    "write_table",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # asked once
    return value
