"""The evidence the verifier checks against itself before judging: each driver's own final counts
in ``_run.json`` against the rows of its part, and each part's schema against the history's. A
part that says less than its driver did, or whose columns the verifier does not know, makes the
verdict inconclusive with one line naming the driver or the file, never a pass or a fail."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pulsarlab.history import part_files
from pulsarlab.verify import verify
from pulsarlab.verify.evidence import contradictions, driver_contradictions, read_manifests, read_scans
from pulsarlab.verify.parts import readable_parts
from tests.unit.test_verify import clean_history, write_parts

# what each driver of clean_history() counted: 10 messages, 5 per producer, read back in full
COUNTS = {
    "producer-p0": ("produce", {"invoked": 5, "acked": 5, "failed": 0, "unknown": 0, "received": 0, "stored": 0}),
    "producer-p1": ("produce", {"invoked": 5, "acked": 5, "failed": 0, "unknown": 0, "received": 0, "stored": 0}),
    "consumer-c0": ("consume", {"invoked": 0, "acked": 0, "failed": 0, "unknown": 0, "received": 10, "stored": 0}),
    "read-c1": ("read", {"invoked": 0, "acked": 0, "failed": 0, "unknown": 0, "received": 0, "stored": 10}),
}


def history_with_counts(directory: Path, counts: dict[str, tuple[str, dict[str, int]]] = COUNTS) -> Path:
    write_parts(directory, clean_history())
    drivers = [{"name": part, "mode": mode, "part": part, "exit_code": 0, "failed": False, "reason": None, "counts": c}
               for part, (mode, c) in counts.items()]
    (directory / "_run.json").write_text(json.dumps(
        {"format": 1, "run": "rA", "topic": "persistent://t/ns/orders", "partitions": 0, "finished": True, "drivers": drivers}))
    return directory


def contradictions_of(directory: Path) -> list[str]:
    good, _ = readable_parts(part_files(directory))
    return driver_contradictions(read_manifests([directory]), set(good))


def test_counts_that_match_the_parts_are_no_contradiction(tmp_path: Path) -> None:
    assert contradictions_of(history_with_counts(tmp_path / "run")) == []


def test_a_part_cut_short_says_less_than_its_driver_counted(tmp_path: Path) -> None:
    run = history_with_counts(tmp_path / "run")
    consumer = run / "consumer-c0.parquet"
    table = pq.read_table(consumer)
    pq.write_table(table.slice(0, table.num_rows - 4), consumer)  # the last two receives and acks lost
    [line] = contradictions_of(run)
    assert line == f"run rA: driver consumer-c0 (consume) counted 10 received, but its part {consumer} holds 8 receive row(s)"


def test_a_driver_that_counted_sends_but_left_no_part_is_named(tmp_path: Path) -> None:
    run = history_with_counts(tmp_path / "run")
    (run / "producer-p1.parquet").unlink()
    [line] = contradictions_of(run)
    assert line == "run rA: driver producer-p1 (produce) counted 5 invoked, 5 acked, but left no history part producer-p1.parquet"


def test_an_outcome_counted_after_the_journal_closed_is_no_contradiction_but_an_extra_row_is(tmp_path: Path) -> None:
    late = {**COUNTS, "producer-p1": ("produce", {**COUNTS["producer-p1"][1], "failed": 1})}
    assert contradictions_of(history_with_counts(tmp_path / "a", late)) == []  # a send/fail row short: allowed
    fewer = {**COUNTS, "producer-p1": ("produce", {**COUNTS["producer-p1"][1], "acked": 4})}
    [line] = contradictions_of(history_with_counts(tmp_path / "b", fewer))
    assert line.startswith("run rA: driver producer-p1 (produce) counted 4 acked, but its part")
    assert line.endswith("holds 5 send/ok row(s)")


def test_a_driver_that_counted_nothing_needs_no_part(tmp_path: Path) -> None:
    idle = {**COUNTS, "consumer-c9": ("consume", dict.fromkeys(COUNTS["consumer-c0"][1], 0))}
    assert contradictions_of(history_with_counts(tmp_path / "run", idle)) == []


def test_a_part_of_unknown_schema_is_named_and_left_out(tmp_path: Path) -> None:
    run = write_parts(tmp_path / "run", clean_history())
    reader = run / "read-c1.parquet"
    table = pq.read_table(reader)
    extra = table.append_column("shard", pa.array(["x"] * table.num_rows))
    retyped = extra.set_column(extra.schema.get_field_index("seq"), "seq", table.column("seq").cast(pa.string()))
    pq.write_table(retyped, reader)
    good, [reason] = readable_parts(part_files(run))
    assert reader not in good
    assert reason == (f"history part {reader} has a schema the verifier does not know (column 'seq' is string, not int64; "
                      "unknown column 'shard'); the verdict leaves it out")


def test_verify_is_inconclusive_on_a_part_that_contradicts_its_driver(spark, tmp_path: Path) -> None:
    run = history_with_counts(tmp_path / "run")
    assert verify(run).status == "pass"
    producer = run / "producer-p0.parquet"
    table = pq.read_table(producer)
    pq.write_table(table.slice(0, table.num_rows - 2), producer)  # its last send and ack lost
    verdict = verify(run)
    assert verdict.status == "inconclusive" and verdict.exit_code == 3, verdict.reasons
    assert f"run rA: driver producer-p0 (produce) counted 5 invoked, but its part {producer} holds 4 send/invoke row(s)" \
        in verdict.reasons, verdict.reasons
    assert not any("acked" in r for r in verdict.reasons), "an outcome counted but not recorded is no contradiction"


def test_scans_of_a_file_whose_row_groups_hold_different_partitions_are_counted_per_partition(tmp_path: Path) -> None:
    """A big read-back file is written in row groups, each with dictionaries of its own: every
    partition's read rows are counted and its last read (highest read_index) found across them."""
    path = tmp_path / "read-c1.parquet"
    schema = pa.schema([("op", pa.string()), ("cluster", pa.string()), ("topic", pa.string()), ("read_index", pa.int64()),
                        ("message_id", pa.string()), ("end_message_id", pa.string()), ("error", pa.string())])
    groups = [
        [("read", "eu", "t-partition-0", i, f"1:{i}:0:-1", None, None) for i in range(3)],
        [("read", "us", "t-partition-1", i, f"7:{i}:1:-1", None, None) for i in (1, 0)],  # not in read_index order
        [("read", "eu", "t-partition-1", 0, "5:0:1:-1", None, None),
         ("scan", "eu", "t-partition-0", 3, "1:2:0:-1", "1:2:0:-1", None),
         ("scan", "us", "t-partition-1", 2, "7:1:1:-1", "7:1:1:-1", None),
         ("scan", "eu", "t-partition-1", 1, "5:0:1:-1", "5:0:1:-1", None)],
    ]
    with pq.ParquetWriter(path, schema) as writer:
        for rows in groups:
            writer.write_table(pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema))
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    scans = {(s.cluster, s.topic): (s.rows, s.last_read) for s in read_scans([str(path)])}
    assert scans == {("eu", "t-partition-0"): (3, "1:2:0:-1"), ("us", "t-partition-1"): (2, "7:1:1:-1"),
                     ("eu", "t-partition-1"): (1, "5:0:1:-1")}
    assert contradictions(read_scans([str(path)])) == []


def test_a_part_in_several_row_groups_is_counted_whole(tmp_path: Path) -> None:
    """A big part is read a row group at a time: its rows are counted across all of them."""
    run = history_with_counts(tmp_path / "run")
    consumer = run / "consumer-c0.parquet"
    table = pq.read_table(consumer)
    pq.write_table(table, consumer, row_group_size=3)
    assert pq.ParquetFile(consumer).metadata.num_row_groups > 3
    assert contradictions_of(run) == []
    pq.write_table(table.slice(0, table.num_rows - 4), consumer, row_group_size=3)
    [line] = contradictions_of(run)
    assert line.endswith("holds 8 receive row(s)")
