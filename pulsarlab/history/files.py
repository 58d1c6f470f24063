"""The names of a history folder's files and how its Parquet files are written: light (no Arrow),
so that code which only names them (the fault schedule, the workload's launch) loads no Arrow."""

from __future__ import annotations

from typing import Any, Final

PART_SUFFIX: Final = ".parquet"
FAULTS_PART: Final = "faults"
"""``faults.parquet``: the run's faults (:mod:`pulsarlab.history.faults`), not an event part."""
WRITE_OPTIONS: Final[dict[str, Any]] = {"compression": "zstd", "write_page_checksum": True}
"""How every Parquet file of a history is written: with a CRC per page, a reader that verifies them
(the verifier does) tells a damaged page from data instead of reading wrong values."""
