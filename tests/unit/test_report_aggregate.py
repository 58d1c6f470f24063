"""The report's numbers: exact counts per second by kind and cluster, exact percentiles per window."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pulsarlab.errors import UsageError
from pulsarlab.history import SCHEMA, HistoryWriter, write_table
from pulsarlab.history.journal import EVENTS_SUFFIX, HAS_SEQ, write_meta
from pulsarlab.report.aggregate import (
    NS,
    aggregate,
    end_to_end_latency,
    messages,
    publish_latency,
    rates,
    step_for,
    windows,
)
from pulsarlab.report.rundir import ReportInputError, load
from tests import report_runs
from tests.unit.test_journal import records, write_strings

T0 = 1_700_000_000 * NS
MS = 1_000_000


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def send(producer: str, seq: int, typ: str, at_ms: int, cluster: str = "eu") -> dict:
    return {"op": "send", "type": typ, "producer": producer, "seq": seq, "cluster": cluster, "ts": T0 + at_ms * MS}


def test_counts_per_second_by_kind_and_cluster_with_empty_seconds_at_zero() -> None:
    events = table([
        send("p", 0, "invoke", 100), send("p", 0, "ok", 150),
        send("p", 1, "invoke", 900), send("p", 1, "info", 2_100),  # completes two seconds later, unknown
        send("p", 2, "invoke", 3_999), send("p", 2, "fail", 3_999),
        send("q", 0, "invoke", 1_000, "us"), send("q", 0, "ok", 1_001, "us"),
        {"op": "receive", "producer": "p", "seq": 0, "cluster": "eu", "ts": T0 + 300 * MS},
        {"op": "receive", "producer": "p", "seq": 0, "cluster": "eu", "ts": T0 + 3_300 * MS},  # redelivered
        {"op": "ack", "type": None, "producer": "p", "seq": 0, "cluster": "eu", "ts": T0 + 310 * MS},
        {"op": "ack", "type": "fail", "producer": "p", "seq": 0, "cluster": "eu", "ts": T0 + 3_310 * MS},
    ])
    r = rates(events, T0)
    assert r.bin_ns == NS and r.bins == 4
    got = {k: v.tolist() for k, v in r.counts.items()}
    assert got == {
        ("sent", "eu"): [2, 0, 0, 1],
        ("sent", "us"): [0, 1, 0, 0],
        ("acknowledged", "eu"): [1, 0, 0, 0],
        ("acknowledged", "us"): [0, 1, 0, 0],
        ("failed", "eu"): [0, 0, 0, 1],
        ("unknown outcome", "eu"): [0, 0, 1, 0],
        ("delivered", "eu"): [1, 0, 0, 1],
        ("consumer acks", "eu"): [1, 0, 0, 0],
        ("consumer acks failed", "eu"): [0, 0, 0, 1],
    }
    assert list(r.counts)[:2] == [("sent", "eu"), ("sent", "us")]  # legend order: kind, then cluster
    assert r.clusters() == ["eu", "us"]
    wide = rates(events, T0, bin_ns=2 * NS)
    assert wide.counts[("sent", "eu")].tolist() == [2, 1]
    assert wide.per_second(("sent", "eu")).tolist() == [1.0, 0.5]


def test_rates_start_at_t0_and_long_runs_get_wider_bins() -> None:
    events = table([send("p", 0, "invoke", 5_500)])
    assert rates(events, T0).counts[("sent", "eu")].tolist() == [0, 0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="precedes t0"):
        rates(events, T0 + 6 * NS)
    assert step_for(7_199 * NS, 7_200) == NS
    assert step_for(7_200 * NS, 7_200) == 2 * NS  # 7,201 one-second bins would be one too many
    assert step_for(10 * 3_600 * NS - 1, 7_200) == 5 * NS
    assert step_for(10**6 * 3_600 * NS, 300) > 3_600 * NS  # past the steps: still at most 300 windows


def test_percentiles_per_window_are_nearest_rank_and_empty_windows_are_left_out() -> None:
    times = np.array([T0 + 10 * MS] * 100 + [T0 + 2_500 * MS] + [T0 + 3_000 * MS] * 4, dtype=np.int64)
    values = np.concatenate([np.arange(100, 0, -1) * MS, [7 * MS], np.array([4, 1, 3, 2]) * MS]).astype(np.int64)
    lat = windows(times, values, T0, NS)
    assert lat.starts_s.tolist() == [0.0, 2.0, 3.0]
    assert lat.count.tolist() == [100, 1, 4]
    assert lat.percentiles["p50"].tolist() == [50.0, 7.0, 2.0]
    assert lat.percentiles["p95"].tolist() == [95.0, 7.0, 4.0]
    assert lat.percentiles["p99"].tolist() == [99.0, 7.0, 4.0]
    assert lat.percentiles["max"].tolist() == [100.0, 7.0, 4.0]
    assert lat.samples == 105
    assert windows(np.zeros(0, np.int64), np.zeros(0, np.int64), T0, NS).samples == 0


def test_publish_latency_pairs_each_ack_with_its_own_invoke() -> None:
    events = table([
        send("p", 0, "invoke", 0), send("q", 0, "invoke", 1), send("p", 1, "invoke", 2),
        send("q", 0, "ok", 31), send("p", 1, "ok", 4), send("p", 0, "ok", 10),
        send("p", 2, "invoke", 5), send("p", 2, "info", 9),  # no ack: no latency
    ])
    at, value = publish_latency(messages(events))
    assert sorted(zip((at - T0) // MS, value // MS, strict=True)) == [(0, 10), (1, 30), (2, 2)]


def test_end_to_end_latency_from_the_message_publish_time_or_else_the_invoke_to_its_first_delivery() -> None:
    events = table([
        send("p", 0, "invoke", 0),
        {"op": "receive", "producer": "p", "seq": 0, "ts": T0 + 50 * MS, "publish_ts": T0 + 10 * MS},
        {"op": "receive", "producer": "p", "seq": 0, "ts": T0 + 900 * MS, "publish_ts": T0 + 10 * MS},  # redelivery
        send("p", 1, "invoke", 20),
        {"op": "receive", "producer": "p", "seq": 1, "ts": T0 + 70 * MS},  # no publish_ts: from the invoke
        {"op": "receive", "producer": "x", "seq": 5, "ts": T0 + 80 * MS},  # never sent here, no publish_ts: no latency
    ])
    at, value = end_to_end_latency(messages(events))
    assert sorted(zip((at - T0) // MS, value // MS, strict=True)) == [(10, 40), (20, 50)]
    anonymous = table([{"op": "receive", "ts": T0}])
    assert [len(a) for a in end_to_end_latency(messages(anonymous))] == [0, 0]


def test_a_hand_made_run_aggregates_to_its_known_rates_and_latencies(tmp_path: Path) -> None:
    run = load(report_runs.write_run(tmp_path / "run"))
    agg = aggregate(run.events, run.started_ns)
    assert agg.t0_ns == report_runs.T0
    r = agg.rates.counts
    assert r[("sent", "eu")].tolist() == [0] + [40] * 20
    assert r[("acknowledged", "us")].tolist() == [0] + [40] * 7 + [0] * 4 + [200] + [40] * 8
    assert r[("delivered", "eu")].tolist() == r[("acknowledged", "eu")].tolist()
    pub = agg.publish
    assert pub.window_ns == NS and pub.samples == 2 * 40 * 20
    assert pub.starts_s.tolist() == [float(s) for s in range(1, 21)]  # at the send: the outage's sends are at 8-11 s
    assert pub.percentiles["p99"][0] == pytest.approx(5.0)
    assert pub.percentiles["max"][7] == pytest.approx(4000.0, abs=1)  # the first send of the outage waited 4 s
    assert pub.percentiles["p50"][10] == pytest.approx(500.0, abs=1)  # sends at 11-12 s waited 1 s down to 25 ms
    assert agg.end_to_end.percentiles["p50"][0] == pytest.approx(12.0)


def test_journals_of_running_writers_are_read_in_place(tmp_path: Path) -> None:
    w = HistoryWriter(tmp_path, "producer-0", flush_rows=1)
    w.append(op="send", type="invoke", producer="p", seq=0, ts=T0)
    w.flush()
    run = load(tmp_path)
    assert run.events.num_rows == 1 and run.sources == 1
    assert w.journal_path.exists() and not w.parquet_path.exists()  # not taken from the live writer
    w.close()


def test_a_driver_journal_is_read_in_place(tmp_path: Path) -> None:
    base = tmp_path / "producer-p0"
    write_meta(base, {"producer": "p0", "cluster": "eu"})
    write_strings(base, [])
    journal = Path(f"{base}{EVENTS_SUFFIX}")
    journal.write_bytes(records({"kind": 1, "flags": HAS_SEQ, "ts": T0, "seq": 0},
                                {"kind": 2, "flags": HAS_SEQ, "ts": T0 + 5 * MS, "seq": 0}).tobytes())
    run = load(tmp_path)
    assert journal.exists() and not (tmp_path / "producer-p0.parquet").exists()
    assert run.sources == 1
    assert aggregate(run.events).publish.percentiles["max"].tolist() == [5.0]


def test_a_directory_without_a_history_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no run directory"):
        load(tmp_path / "absent")
    with pytest.raises(ReportInputError, match="no history in"):
        load(tmp_path)
    write_table(tmp_path, "read-eu", [{"op": "read", "producer": "p", "seq": 0, "ts": T0}])
    with pytest.raises(ReportInputError, match="no send, receive or ack"):
        load(tmp_path)
