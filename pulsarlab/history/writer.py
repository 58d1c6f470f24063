"""HistoryWriter: a run part written from Python code of one's own, as an Arrow IPC journal.

Every process of a run (each producer, each consumer, the final reader) owns one part of the
run directory. While it runs, a part is an Arrow IPC *journal* (``<part>.arrows``) to which a
record batch is appended and flushed every ``flush_rows`` rows or ``flush_seconds`` seconds, so a
crash or ``kill -9`` loses at most the batch that was not flushed yet. ``close()`` turns the
journal into ``<part>.parquet``; a journal left behind by a dead process is salvaged (every
complete batch) by :func:`recover_journals`, which :func:`read_history` and the verifier run first.

The format is public and documented in ``docs/history.md``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from pulsarlab.history.schema import ACK_TYPES, COLUMNS, OPS, PART_SUFFIX, SCHEMA, SEND_TYPES, WRITE_OPTIONS

JOURNAL_SUFFIX: Final = ".arrows"


class HistoryWriter:
    """Appends events to one part of a run directory, flushing as it goes.

    ``append`` is thread-safe (producer callbacks run on client threads). A background thread
    flushes buffered rows at least every ``flush_seconds`` even when nothing else is appended.
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        part_name: str,
        *,
        flush_rows: int = 10_000,
        flush_seconds: float = 0.5,
    ) -> None:
        if not part_name or "/" in part_name or part_name.startswith((".", "_")):
            raise ValueError(f"invalid part name {part_name!r}: no '/', must not start with '.' or '_'")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.part_name = part_name
        self.journal_path = self.directory / f"{part_name}{JOURNAL_SUFFIX}"
        self.parquet_path = self.directory / f"{part_name}{PART_SUFFIX}"
        for existing in (self.journal_path, self.parquet_path):
            if existing.exists():
                raise FileExistsError(f"history part already exists: {existing}")
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self.rows_written = 0
        self._lock = threading.Lock()
        self._buffer: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        self._buffered = 0
        self._closed = False
        self._sink = open(self.journal_path, "wb")  # noqa: SIM115 - closed in close()
        self._stream = ipc.new_stream(self._sink, SCHEMA)
        self._sink.flush()
        self._stop = threading.Event()
        self._flusher = threading.Thread(target=self._flush_periodically, name=f"history-{part_name}", daemon=True)
        self._flusher.start()

    def append(self, **fields: Any) -> None:
        """Buffer one event. ``op`` is required; ``ts`` defaults to now (ns since the epoch)."""
        op = fields.get("op")
        if op not in OPS:
            raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
        kind = fields.get("type")
        if op == "send" and kind not in SEND_TYPES:
            raise ValueError(f"a send needs type in {sorted(SEND_TYPES)}, got {kind!r}")
        if op == "ack" and kind is not None and kind not in ACK_TYPES:
            raise ValueError(f"an ack's type is one of {sorted(ACK_TYPES)} or null, got {kind!r}")
        if op not in ("send", "ack") and kind is not None:
            raise ValueError(f"type is only for sends and acks, got type={kind!r} on op={op!r}")
        unknown = fields.keys() - self._buffer.keys()
        if unknown:
            raise TypeError(f"unknown history columns: {sorted(unknown)}")
        if fields.get("ts") is None:
            fields["ts"] = time.time_ns()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"history writer {self.part_name} is closed")
            for name, column in self._buffer.items():
                column.append(fields.get(name))
            self._buffered += 1
            if self._buffered >= self.flush_rows:
                self._flush_locked()

    @property
    def buffered(self) -> int:
        """Rows appended but not flushed yet."""
        return self._buffered

    def flush(self) -> None:
        """Write buffered rows to the journal and hand them to the OS."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._buffered:
            return
        batch = pa.record_batch([pa.array(self._buffer[name], type=SCHEMA.field(name).type) for name in COLUMNS], schema=SCHEMA)
        self._buffer = {name: [] for name in COLUMNS}
        self._buffered = 0
        self._stream.write_batch(batch)
        self.rows_written += batch.num_rows
        self._sink.flush()

    def _flush_periodically(self) -> None:
        while not self._stop.wait(self.flush_seconds):
            with self._lock:
                if self._closed:
                    return
                self._flush_locked()

    def close(self) -> Path:
        """Flush, stop the flusher and turn the journal into ``<part>.parquet``; idempotent."""
        with self._lock:
            if self._closed:
                return self.parquet_path
            self._flush_locked()
            self._closed = True
            self._stream.close()
            self._sink.close()
        self._stop.set()
        self._flusher.join()
        journal_to_parquet_arrows(self.journal_path)
        return self.parquet_path

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_journal(path: str | os.PathLike[str]) -> pa.Table:
    """Every complete batch of a journal, also one whose writer died mid-batch."""
    batches: list[pa.RecordBatch] = []
    with open(path, "rb") as source:
        try:
            reader = ipc.open_stream(source)
        except (pa.ArrowInvalid, OSError):  # died before the schema reached the disk
            return SCHEMA.empty_table()
        while True:
            try:
                batches.append(reader.read_next_batch())
            except StopIteration:
                break
            except (pa.ArrowInvalid, OSError):  # truncated tail: the unflushed batch
                break
    return pa.Table.from_batches(batches, schema=SCHEMA)


def journal_to_parquet_arrows(journal: Path) -> Path:
    target = journal.with_suffix(PART_SUFFIX)
    partial = journal.with_name(f".{journal.stem}.parquet.tmp")
    pq.write_table(read_journal(journal), partial, **WRITE_OPTIONS)
    os.replace(partial, target)
    journal.unlink()
    return target
