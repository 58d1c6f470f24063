"""HistoryWriter: rows survive as they are flushed, also when the writer is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from pulsarlab.history import (
    SCHEMA,
    HistoryWriter,
    read_history,
    read_journal,
    recover_journals,
    write_table,
)
from tests.eventually import eventually


def in_threads(target, args: list) -> None:
    """Run ``target(arg)`` for each arg, all at once, each in a thread of its own; wait for all."""
    threads = [threading.Thread(target=target, args=(a,)) for a in args]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_close_writes_parquet_with_the_schema(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "producer-0") as w:
        w.append(op="send", type="invoke", producer="p0", seq=0, key="k", ts=5)
        w.append(op="send", type="ok", producer="p0", seq=0, message_id="1:0:-1:-1", redelivery_count=None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["producer-0.parquet"]
    table = read_history(tmp_path)
    assert table.schema == SCHEMA
    rows = table.to_pylist()
    assert [(r["type"], r["ts"] == 5) for r in rows] == [("invoke", True), ("ok", False)]
    assert rows[1]["ts"] > 1_600_000_000 * 10**9  # defaulted to now, in ns
    assert rows[1]["key"] is None


def test_bad_rows_are_refused(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "p") as w:
        with pytest.raises(ValueError, match="op must be"):
            w.append(op="publish")
        with pytest.raises(ValueError, match="a send needs type"):
            w.append(op="send", type="timeout")
        with pytest.raises(ValueError, match="only for sends"):
            w.append(op="receive", type="ok")
        with pytest.raises(TypeError, match="unknown history columns"):
            w.append(op="read", offset=3)
    with pytest.raises(FileExistsError):
        HistoryWriter(tmp_path, "p")


def test_periodic_flush_reaches_the_journal_without_close(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, "consumer", flush_rows=1_000_000, flush_seconds=0.05)
    w.append(op="receive", producer="p", seq=1)

    def one_row_flushed() -> None:
        assert read_journal(w.journal_path).num_rows == 1

    eventually(one_row_flushed, timeout=5, interval=0.02, what="the periodic flush of the journal")
    w.close()


def test_appends_from_many_threads_are_all_kept(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "p", flush_rows=97) as w:

        def produce(name: str) -> None:
            for seq in range(500):
                w.append(op="send", type="invoke", producer=name, seq=seq)

        in_threads(produce, [f"p{i}" for i in range(8)])
    table = read_history(tmp_path)
    pairs = set(zip(table.column("producer").to_pylist(), table.column("seq").to_pylist(), strict=True))
    assert table.num_rows == len(pairs) == 8 * 500


CHILD = textwrap.dedent(
    """
    import sys, time
    from pulsarlab.history import HistoryWriter
    w = HistoryWriter(sys.argv[1], "producer-killed", flush_rows=100, flush_seconds=60)
    for seq in range(250):  # 200 rows flushed in two batches, 50 still buffered
        w.append(op="send", type="invoke", producer="p", seq=seq)
    print("ready", flush=True)
    time.sleep(60)  # stays up until the test kills it
    """
)


def test_rows_flushed_before_sigkill_are_readable(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert [p.name for p in tmp_path.iterdir()] == ["producer-killed.arrows"]
    write_table(tmp_path, "read-c1", [{"op": "read", "producer": "p", "seq": 0, "ts": 1}])
    table = read_history(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["producer-killed.parquet", "read-c1.parquet"]
    sends = table.filter(pa.compute.equal(table.column("op"), "send"))
    assert sends.column("seq").to_pylist() == list(range(200))


def test_truncated_journal_keeps_every_complete_batch(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, "p", flush_rows=10)
    for seq in range(30):
        w.append(op="send", type="invoke", producer="p", seq=seq)
    w._sink.flush()
    size = w.journal_path.stat().st_size
    os.truncate(w.journal_path, size - 7)  # the last batch is cut short
    assert read_journal(w.journal_path).column("seq").to_pylist() == list(range(20))
    assert recover_journals(tmp_path) == [tmp_path / "p.parquet"]
    w._stop.set()  # the journal is gone: stop the flusher without closing
