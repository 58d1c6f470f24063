"""The plan without the big exchange (pulsarlab/verify/stripes.py): which histories it takes, how
it groups their row groups, and that it gives the verdict the general plan gives."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.history_gen import EVIDENCE, KINDS, generate
from pulsarlab.verify.stripes import BYTES_PER_ROW, MAX_ROWS, Piece, assign, groups, producer_span, row_limit

PRODUCERS = ["p0", "p1", "p2", "p3"]


def _stats(tmp_path: Path, values: list[str | None]):  # type: ignore[no-untyped-def]
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"producer": pa.array(values, pa.string())}), path)
    return pq.ParquetFile(path).metadata.row_group(0).column(0).statistics


def test_a_row_groups_producer_statistics_bound_the_producers_it_may_hold(tmp_path: Path) -> None:
    assert producer_span(_stats(tmp_path, ["p1", "p2", "p1"]), PRODUCERS) == (1, 2)
    assert producer_span(_stats(tmp_path, ["p3", None]), PRODUCERS) == (3, 3)
    assert producer_span(_stats(tmp_path, ["other-run-p0"]), PRODUCERS) is None  # no producer of the history
    assert producer_span(_stats(tmp_path, [None, None]), PRODUCERS) is None  # deliveries without a producer
    assert producer_span(None, PRODUCERS) == (0, 3)  # no statistics: any producer


def test_overlapping_spans_make_one_group() -> None:
    assert groups([(0, 1), (4, 5), (1, 2), None, (5, 5), (7, 7)]) == [(0, 2), (4, 5), (7, 7)]


def _piece(file: int, rows: int, span: tuple[int, int] | None) -> Piece:
    return Piece(file, 0, rows, span)


def test_each_group_goes_to_one_task_and_a_row_group_of_no_producer_to_the_lightest() -> None:
    pieces = [_piece(0, 100, (0, 0)), _piece(1, 100, (1, 1)), _piece(2, 100, (0, 0)), _piece(3, 90, (1, 1)),
              _piece(4, 5, None)]
    tasks = assign(pieces, cores=2)
    assert tasks is not None
    assert sorted(sorted(p.file for p in t) for t in tasks) == [[0, 2], [1, 3, 4]]


@pytest.mark.parametrize("pieces, why", [
    ([_piece(0, 100, (0, 3)), _piece(1, 100, (2, 3))], "one group for two cores"),
    ([_piece(0, 300, (0, 0)), _piece(1, 100, (1, 1))], "a core with three quarters of the work"),
    ([_piece(0, 100, (0, 0)), _piece(1, 100, (1, 1)), _piece(2, 100, (2, 2))], "three even groups on two cores"),
])
def test_the_general_plan_runs_when_groups_would_leave_a_core_idle(pieces: list[Piece], why: str) -> None:
    assert assign(pieces, cores=2) is None, why


def test_a_group_too_big_for_one_task_takes_the_general_plan() -> None:
    pieces = [_piece(0, 100, (0, 0)), _piece(1, 100, (1, 1))]
    assert assign(pieces, cores=2, max_rows=99) is None
    assert assign(pieces, cores=2, max_rows=100) is not None


def test_a_task_holds_at_most_half_the_memory_there_is_over_the_cores() -> None:
    """On a smaller machine a task gets fewer rows (its events are held until judged): 8 GiB
    available on two cores is half of it for two tasks of BYTES_PER_ROW a row; this machine's
    24 GiB keeps the fixed limit; a cluster's executors, unknown here, keep it too."""
    gib = 1 << 30
    assert row_limit(8 * gib, cores=2) == 2 * gib // BYTES_PER_ROW < MAX_ROWS
    assert row_limit(8 * gib, cores=2) * 2 * BYTES_PER_ROW <= 4 * gib
    assert row_limit(24 * gib, cores=2) == MAX_ROWS
    assert row_limit(None, cores=2) == MAX_ROWS
    # the bench's 10M history (groups of 25 million rows) is judged whole per producer only with room
    assert row_limit(8 * gib, cores=2) < 25 << 20 <= row_limit(12 * gib, cores=2)


def _verdict(spark, directory: Path, strategy: str) -> dict:  # type: ignore[no-untyped-def]
    from pulsarlab.verify.job import verify

    out = directory.parent / f"{directory.name}-{strategy}.json"
    verify(directory, out=out, strategy=strategy)  # type: ignore[arg-type]
    found = json.loads(out.read_text())
    found.pop("seconds", None)
    return found


def test_both_plans_give_the_same_verdict_on_a_history_with_every_anomaly(spark, tmp_path: Path) -> None:
    """Two clusters, each with its own producers, consumers and read-back: the stripes plan takes
    it (two tasks, one per cluster's producers, when asked for: a history this small is otherwise
    one task), and judges every planted anomaly, every count and every example as the general plan
    does, deliveries without a producer counted once over both tasks."""
    from pulsarlab.verify.job import _Job
    from pulsarlab.verify.model import Expectations
    from pulsarlab.verify.reconcile import reconcile

    history = tmp_path / "all"
    generate(history, 30_000, frozenset(KINDS) - {"unfinished"})
    assert len(_Job(spark, [history], Expectations(), reconcile([history]), "stripes").tasks or []) == 2
    assert len(_Job(spark, [history], Expectations(), reconcile([history])).tasks or []) == 1  # "auto": one task
    general, striped = _verdict(spark, history, "exchange"), _verdict(spark, history, "stripes")
    assert striped == general
    assert _verdict(spark, history, "auto") == general  # the one task of a small history
    counts = {c["name"]: c["count"] for c in striped["checks"]}
    assert all(counts[k] > 0 for k in KINDS if k in counts and k not in EVIDENCE), counts
    assert striped["status"] == "inconclusive"  # the planted missing scan and failed drivers


def test_a_damaged_page_is_named_the_same_way_by_both_plans(spark, tmp_path: Path) -> None:
    """A part whose page fails its checksum while a task reads it is left out and named, whichever
    plan read it: the verdict is inconclusive and the same."""
    history = tmp_path / "damaged"
    generate(history, 30_000, frozenset())
    part = history / "consumer-a-c0.parquet"
    meta = pq.ParquetFile(part).metadata
    seq = meta.row_group(1).column(meta.schema.to_arrow_schema().get_field_index("seq"))
    with part.open("r+b") as f:  # inside the seq column's first data page, which every plan reads
        f.seek(seq.data_page_offset + seq.total_compressed_size // 2)
        f.write(b"\xff" * 64)
    general, striped = _verdict(spark, history, "exchange"), _verdict(spark, history, "stripes")
    assert striped == general
    assert striped["status"] == "inconclusive"
    assert any(str(part) in r and "cannot be read" in r for r in striped["reasons"]), striped["reasons"]
