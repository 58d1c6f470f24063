"""The faults of a run: one row per fault action the scheduler ran (applied or healed), in the
run directory beside the workload's parts, as ``faults.parquet`` (see ``docs/history.md``).

The file is rewritten whole, atomically, after every fault: a run holds a few dozen faults at
most, and a reader (or a crash) never sees half a file. It is not an event part
(:func:`~pulsarlab.history.schema.part_files` leaves it out): its rows have a schema of their own.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pulsarlab.history.files import FAULTS_PART, PART_SUFFIX, WRITE_OPTIONS

if TYPE_CHECKING:
    import pyarrow as pa

FAULTS_FILE: Final = f"{FAULTS_PART}{PART_SUFFIX}"


@functools.cache
def fault_schema() -> pa.Schema:
    """The columns of a faults file, one row per fault: its place in the schedule, what (action,
    args, the nodes it acted on), whether it damaged or healed, when (seconds from the schedule's
    start on the monotonic clock; wall clock in ns when it began, when its damage took effect where
    the nodes run, when it returned), and how it went (``ok`` with what it did, or ``error``).
    ``effect_ts`` is null for a fault that reports no such moment, and in histories written before
    it existed (read as null). ``parts``: for a fault that acts on nodes one after another (a
    rolling upgrade), each node's window away, from when it was taken out to when it answered ready
    again (wall clock, ns); null or empty for every other fault."""
    import pyarrow as pa  # Arrow loads when a faults file is written or read, not with this module

    return pa.schema(
        [
            pa.field("step", pa.int32(), nullable=False),
            pa.field("action", pa.string(), nullable=False),
            pa.field("args", pa.list_(pa.string()), nullable=False),
            pa.field("nodes", pa.list_(pa.string()), nullable=False),
            pa.field("phase", pa.string(), nullable=False),
            pa.field("offset_s", pa.float64(), nullable=False),
            pa.field("ts", pa.int64(), nullable=False),
            pa.field("ended_ts", pa.int64(), nullable=False),
            pa.field("outcome", pa.string(), nullable=False),
            pa.field("done", pa.string()),
            pa.field("error", pa.string()),
            pa.field("effect_ts", pa.int64()),
            pa.field("parts", pa.list_(pa.struct([pa.field("node", pa.string(), nullable=False),
                                                  pa.field("from_ts", pa.int64(), nullable=False),
                                                  pa.field("to_ts", pa.int64(), nullable=False)]))),
        ]
    )


OPTIONAL: Final = frozenset({"effect_ts", "parts"})  # columns added after the first histories: read as null
APPLIED: Final = "applied"  # the action does damage
HEALED: Final = "healed"  # the action undoes some (start, resume, heal)
OUTCOMES: Final = frozenset({"ok", "error"})
PHASES: Final = frozenset({APPLIED, HEALED})


@dataclass(frozen=True)
class NodeWindow:
    """One node's time away during a fault that moves nodes one at a time: taken out at ``from_ts``,
    ready again at ``to_ts`` (wall clock, ns)."""

    node: str
    from_ts: int
    to_ts: int


@dataclass(frozen=True)
class FaultRow:
    step: int
    action: str
    args: tuple[str, ...]
    nodes: tuple[str, ...]
    phase: str
    offset_s: float
    ts: int
    ended_ts: int
    outcome: str
    done: str | None = None
    error: str | None = None
    effect_ts: int | None = None  # when its damage took effect (a node stopped), by the clock where it runs
    parts: tuple[NodeWindow, ...] = ()

    @property
    def from_ts(self) -> int:
        """Where recovery is counted from: when the damage took effect, else when the action returned."""
        return self.effect_ts if self.effect_ts is not None else self.ended_ts

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES or self.phase not in PHASES:
            raise ValueError(f"fault row: outcome must be one of {sorted(OUTCOMES)} and phase one of {sorted(PHASES)}, "
                             f"got {self.outcome!r}, {self.phase!r}")

    @property
    def fault(self) -> str:
        """The fault as a scenario writes it: ``ACTION ARGS...``."""
        return " ".join((self.action, *self.args))

    @property
    def error_line(self) -> str | None:
        """The error on one line: its first (what failed), and its last when there are more (a
        failed command's cause comes last in its output)."""
        if self.error is None:
            return None
        lines = [line.strip() for line in self.error.splitlines() if line.strip()]
        return " ... ".join(lines[:1] + lines[-1:] if len(lines) > 1 else lines)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> FaultRow:
        return cls(**{**row, "args": tuple(row["args"] or ()), "nodes": tuple(row["nodes"] or ()),
                      "parts": tuple(NodeWindow(**p) for p in row.get("parts") or ())})


class FaultJournal:
    """Appends fault rows to ``<directory>/faults.parquet``; thread-safe."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / FAULTS_FILE
        if self.path.exists():
            raise FileExistsError(f"history part already exists: {self.path}")
        self.rows: list[FaultRow] = []
        self._lock = threading.Lock()
        # the first Parquet write in a process sets up its writer and codec (about 0.6 s here): done
        # now, in memory, so the first fault's row does not hold back the next step of a schedule
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(fault_schema().empty_table(), pa.BufferOutputStream(), **WRITE_OPTIONS)

    def append(self, row: FaultRow) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self._lock:
            self.rows.append(row)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f".{FAULTS_FILE}.tmp")
            table = pa.Table.from_pylist([asdict(r) for r in self.rows], schema=fault_schema())
            pq.write_table(table, partial, **WRITE_OPTIONS)
            os.replace(partial, self.path)


def read_faults(directory: str | os.PathLike[str]) -> list[FaultRow] | None:
    """The fault rows of a run directory in schedule order; None when it has no faults file
    (a run without a schedule). A file that is not one of faults is a ``ValueError``."""
    import pyarrow.parquet as pq

    path = Path(directory) / FAULTS_FILE
    if not path.is_file():
        return None
    missing = [n for n in fault_schema().names if n not in OPTIONAL and n not in pq.read_schema(path).names]
    if missing:  # read with the schema, those would be nulls: no fault row at all
        raise ValueError(f"not a faults file, no column(s) {', '.join(missing)}")
    table = pq.read_table(path, schema=fault_schema())
    return sorted((FaultRow.from_row(r) for r in table.to_pylist()), key=lambda r: (r.step, r.ts))
