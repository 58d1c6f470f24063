"""HistoryWriter: rows survive as they are flushed, also when the writer is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from pulsarlab.workload.history import (
    SCHEMA,
    HistoryWriter,
    read_history,
    read_journal,
    recover_journals,
    write_table,
)


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
    deadline = time.monotonic() + 5
    while read_journal(w.journal_path).num_rows == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert read_journal(w.journal_path).num_rows == 1
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
    from pulsarlab.workload.history import HistoryWriter
    w = HistoryWriter(sys.argv[1], "producer-killed", flush_rows=100, flush_seconds=60)
    for seq in range(250):  # 200 rows flushed in two batches, 50 still buffered
        w.append(op="send", type="invoke", producer="p", seq=seq)
    print("ready", flush=True)
    time.sleep(60)
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


def test_append_send_fills_the_constant_columns_and_converts_at_flush(tmp_path: Path) -> None:
    class FakeId:  # stands in for pulsar.MessageId: text only when flushed
        def __str__(self) -> str:
            return "(7,3,-1,0)"

    constants = {"producer": "p0", "topic": "persistent://t/ns/x", "cluster": "eu", "region": "west"}
    with HistoryWriter(tmp_path, "producer-p0", flush_rows=3, send_constants=constants) as w:
        w.append_send("invoke", 0, "k1", 0x0913DEB2, 10)
        w.append_send("ok", 0, "k1", 0x0913DEB2, 20, FakeId())
        w.append_send("invoke", 1, None, "00000001", 30)
        w.append_send("info", 1, None, "00000001", 40, None, "Timeout")
        w.append(op="send", type="fail", producer="p0", seq=2, error="refused")  # the generic path still works alongside
        assert w.buffered == 2
    rows = sorted(read_history(tmp_path).to_pylist(), key=lambda r: r["ts"])
    expected = [("invoke", 0, 10), ("ok", 0, 20), ("invoke", 1, 30), ("info", 1, 40)]
    assert [(r["type"], r["seq"], r["ts"]) for r in rows[:4]] == expected
    assert rows[0]["payload_hash"] == rows[1]["payload_hash"] == "0913deb2"
    assert rows[1]["message_id"] == "(7,3,-1,0)" and rows[0]["message_id"] is None
    assert rows[3]["error"] == "Timeout" and rows[3]["key"] is None
    for r in rows[:4]:
        assert (r["op"], r["producer"], r["topic"], r["cluster"], r["region"]) == ("send", *constants.values())
        assert r["consumer"] is None and r["read_index"] is None
    assert rows[4]["type"] == "fail" and rows[4]["topic"] is None


def test_append_send_refuses_bad_rows(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="send_constants"):
        HistoryWriter(tmp_path, "bad", send_constants={"consumer": "c0"})
    w = HistoryWriter(tmp_path, "p", send_constants={"producer": "p0"})
    with pytest.raises(ValueError, match="a send needs type"):
        w.append_send("timeout", 0, "k", 1, 1)
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.append_send("invoke", 0, "k", 1, 1)


def test_append_send_from_two_threads_loses_no_row_while_flushing(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path, "p", flush_rows=101, flush_seconds=0.01, send_constants={"producer": "p"}) as w:

        def record(kind: str) -> None:
            for seq in range(5000):
                w.append_send(kind, seq, None, seq, seq)

        in_threads(record, ["invoke", "ok"])
    table = read_history(tmp_path)
    pairs = set(zip(table.column("type").to_pylist(), table.column("seq").to_pylist(), strict=True))
    assert table.num_rows == len(pairs) == 2 * 5000


def test_send_rows_flushed_before_sigkill_are_readable(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD.replace(
        'HistoryWriter(sys.argv[1], "producer-killed", flush_rows=100, flush_seconds=60)',
        'HistoryWriter(sys.argv[1], "producer-killed", flush_rows=100, flush_seconds=60, send_constants={"producer": "p"})',
    ).replace('w.append(op="send", type="invoke", producer="p", seq=seq)', 'w.append_send("invoke", seq, None, seq, seq)'),
        str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    table = read_history(tmp_path)
    assert table.column("seq").to_pylist() == list(range(200))
    assert set(table.column("producer").to_pylist()) == {"p"}
