"""Every file of a history checked against the others before judging: a small history with its
manifest (as ``workload run`` leaves it), broken one way at a time as disks, copies and other
tools break them. Each break makes the verdict inconclusive (exit 3) with a line naming the file
and what contradicts it; none may end in a traceback, a pass or a fail."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.history import write_table
from pulsarlab.history.faults import FAULTS_FILE, FaultJournal, FaultRow
from pulsarlab.verify.reconcile import reconcile
from tests.unit.test_verify import T0, TOPIC
from tests.unit.test_verify_evidence import history_with_counts

runner = CliRunner()
Break = Callable[[Path], str]  # breaks the history in a folder; returns what a reason must say


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = history_with_counts(tmp_path_factory.mktemp("sound") / "run")
    FaultJournal(run).append(FaultRow(0, "kill", ("bk1",), ("bk1",), "applied", 1.0, T0, T0 + 1, "ok", "killed"))
    return run


def copy(sound: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(sound, tmp_path / "run"))


def rewrite(path: Path, edit: Callable[[list[dict]], list[dict]]) -> None:
    table = pq.read_table(path)
    pq.write_table(pa.Table.from_pylist(edit(table.to_pylist()), schema=table.schema), path)


def edit_manifest(run: Path, edit: Callable[[dict], None]) -> None:
    data = json.loads((run / "_run.json").read_text())
    edit(data)
    (run / "_run.json").write_text(json.dumps(data))


def reasons(run: Path) -> list[str]:
    history = reconcile([run])
    assert history.evidence.contradicted or not history.evidence.reasons
    return history.evidence.reasons


def test_a_sound_history_reconciles_without_a_word(sound: Path) -> None:
    history = reconcile([sound])
    assert history.evidence.reasons == [] and not history.evidence.contradicted
    assert [p.name for p in history.paths] == ["consumer-c0.parquet", "producer-p0.parquet", "producer-p1.parquet",
                                              "read-c1.parquet"]
    assert history.notes == ["1 fault(s) in the history (faults.parquet): 1 applied, 0 healed"]


# -- breaks the driver reads before Spark starts: each named, each one line ---------------------
def footer_kept_middle_lost(run: Path) -> str:  # a copy that lost a block but kept the file's end
    part = run / "producer-p1.parquet"
    data, lost = part.read_bytes(), pq.read_metadata(part).row_group(0).column(3).data_page_offset
    part.write_bytes(data[:lost] + data[lost + 40 :])
    return f"history part {part} cannot be read (column "


def unknown_op(run: Path) -> str:
    part = run / "consumer-c0.parquet"
    rewrite(part, lambda rows: [*rows, {**rows[-1], "op": "teleport"}])
    return f"history part {part} holds rows of op(s) the verifier does not know: teleport"


def part_of_no_driver(run: Path) -> str:  # another run's part copied in
    stray = run / "consumer-c5.parquet"
    shutil.copy(run / "consumer-c0.parquet", stray)
    return f"history part {stray} was written by no driver of run rA (its _run.json lists consumer-c0, producer-p0"


def driver_exited_without_a_part(run: Path) -> str:  # a manifest of before counts were recorded
    def no_counts(m: dict) -> None:
        for d in m["drivers"]:
            d["counts"] = None

    edit_manifest(run, no_counts)
    (run / "consumer-c0.parquet").unlink()
    return "run rA: driver consumer-c0 (consume) exited 0, but left no history part consumer-c0.parquet"


def manifest_of_another_format(run: Path) -> str:
    edit_manifest(run, lambda m: m.update(format=7))
    return f"run manifest {run / '_run.json'} cannot be read: format 7, this version reads format 1"


def manifest_counts_not_numbers(run: Path) -> str:
    edit_manifest(run, lambda m: m["drivers"][0]["counts"].update(acked="lots"))
    return "driver producer-p0 has counts that are not whole numbers"


def faults_cut_short(run: Path) -> str:
    faults = run / FAULTS_FILE
    faults.write_bytes(faults.read_bytes()[:100])
    return f"faults file {faults} cannot be read ("


def faults_of_something_else(run: Path) -> str:
    pq.write_table(pa.table({"step": [1]}), run / FAULTS_FILE)
    return f"faults file {run / FAULTS_FILE} cannot be read (not a faults file, no column(s) action, args"


def journal_beyond_salvage(run: Path) -> str:  # a driver died; its journal's description is garbage
    (run / "consumer-c7.events").write_bytes(bytes(160))
    (run / "consumer-c7.meta.json").write_text("{not json")
    return f"journal {run / 'consumer-c7'} cannot be turned into a history part ("


def scan_short_of_its_reads(run: Path) -> str:  # the scan row and the read rows tell two stories
    def edit(rows: list[dict]) -> list[dict]:
        rows[-1]["message_id"] = "7:6:-1:-1"
        return rows

    rewrite(run / "read-c1.parquet", edit)
    return (f"{run / 'read-c1.parquet'}: its scan of {TOPIC} on cluster c1 says the last message read was 7:6:-1:-1, "
            "but its last read row (by read_index) is 7:9:-1:-1")


@pytest.mark.parametrize("broken", [
    footer_kept_middle_lost, unknown_op, part_of_no_driver, driver_exited_without_a_part, manifest_of_another_format,
    manifest_counts_not_numbers, faults_cut_short, faults_of_something_else, journal_beyond_salvage,
    scan_short_of_its_reads,
], ids=lambda f: f.__name__)
def test_each_break_is_one_reason_naming_the_file(broken: Break, sound: Path, tmp_path: Path) -> None:
    run = copy(sound, tmp_path)
    says = broken(run)
    found = reasons(run)
    assert any(says in r for r in found), found
    assert reconcile([run]).evidence.contradicted, "a presence check found on such evidence decides nothing"


# -- the verifier and the command on real breaks: exit 3, the file named, no traceback -----------
def read_back_cut_short(run: Path) -> str:  # the case: the reads of a copy cut short, its scan row kept
    rewrite(run / "read-c1.parquet", lambda rows: rows[:4] + rows[-1:])
    return f"{run / 'read-c1.parquet'}: its scan of {TOPIC} on cluster c1 says 10 message(s) were read, but the file holds 4"


def part_cut_in_half(run: Path) -> str:
    part = run / "consumer-c0.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    return f"history part {part} cannot be read (Parquet magic bytes not found"


def zero_page_bytes(part: Path, column: str) -> None:
    """16 bytes of ``column``'s first data page (row group 0) zeroed: the footer stays sound."""
    chunk = pq.read_metadata(part).row_group(0).column(pq.read_schema(part).names.index(column))
    data = bytearray(part.read_bytes())
    data[chunk.data_page_offset + 8 : chunk.data_page_offset + 24] = bytes(16)
    part.write_bytes(bytes(data))


def damaged_page(run: Path) -> str:  # the footer is sound; a page of data is not (its checksum says so)
    part = run / "producer-p0.parquet"
    zero_page_bytes(part, "seq")
    return f"history part {part} cannot be read (row group 0: "


def damaged_page_of_a_delivery_without_producer(run: Path) -> str:
    """A delivery without a producer is named by its message id: a damaged page of that column,
    which the map tasks read only for such histories."""
    part = run / "consumer-c0.parquet"
    rows = pq.read_table(part).to_pylist()
    anonymous = {"op": "receive", "ts": T0, "topic": TOPIC, "cluster": "c1", "subscription": "audit", "consumer": "c0",
                 "message_id": "9:9:-1:-1"}
    write_table(run, "consumer-c0", [*rows, anonymous])
    edit_manifest(run, lambda m: m["drivers"][2]["counts"].update(received=11))
    zero_page_bytes(part, "message_id")
    return f"history part {part} cannot be read (row group 0: "


def part_missing(run: Path) -> str:
    (run / "producer-p1.parquet").unlink()
    return "run rA: driver producer-p1 (produce) counted 5 invoked, 5 acked, but left no history part producer-p1.parquet"


def summary_disagrees(run: Path) -> str:
    edit_manifest(run, lambda m: m["drivers"][2]["counts"].update(received=12))
    return f"run rA: driver consumer-c0 (consume) counted 12 received, but its part {run / 'consumer-c0.parquet'} holds 10"


def unknown_schema(run: Path) -> str:
    part = run / "read-c1.parquet"
    table = pq.read_table(part)
    pq.write_table(table.append_column("shard", pa.array(["x"] * table.num_rows)), part)
    return f"history part {part} has a schema the verifier does not know (unknown column 'shard')"


@pytest.mark.parametrize("broken", [read_back_cut_short, part_cut_in_half, damaged_page,
                                    damaged_page_of_a_delivery_without_producer, part_missing,
                                    summary_disagrees, unknown_schema], ids=lambda f: f.__name__)
def test_verify_says_inconclusive_naming_the_file(spark, broken: Break, sound: Path, tmp_path: Path) -> None:
    run = copy(sound, tmp_path)
    says = broken(run)
    result = runner.invoke(app, ["verify", str(run), "--json"])
    assert result.exit_code == 3, result.output
    verdict = json.loads(result.stdout)
    assert verdict["status"] == "inconclusive"
    assert any(says in r for r in verdict["reasons"]), verdict["reasons"]
    assert says in result.stderr.replace("\n", "")
    assert "Traceback" not in result.output and "\tat " not in result.output, result.output  # no Python or Java stack


def test_the_sound_history_passes(spark, sound: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["verify", str(copy(sound, tmp_path))])
    assert result.exit_code == 0, result.output


# -- not a history: exit 2 before a JVM, one line saying what was expected ---------------------
def test_what_is_not_a_history_is_a_usage_error_before_spark_is_imported(sound: Path, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(sound, runs / "sync-partition")
    other = tmp_path / "sales"
    other.mkdir()
    pq.write_table(pa.table({"region": ["eu"], "amount": [3]}), other / "2026.parquet")
    script = (
        "import sys, json\n"
        "from typer.testing import CliRunner\n"
        "from pulsarlab.cli import app\n"
        "r = CliRunner().invoke(app, ['verify', *sys.argv[1:]])\n"
        "print(json.dumps([r.exit_code, r.stderr, 'pyspark' in sys.modules]))\n"
    )
    cases = [
        ([str(runs / "sync-partiton")], f"no history folder {runs / 'sync-partiton'}: nothing there, expected a run's "
                                        f"history folder ('pulsarlab workload run --out DIR' writes one); did you mean "
                                        f"{runs / 'sync-partition'}?"),
        ([str(other)], f"{other} is not a run history: no _run.json, and its Parquet files (2026.parquet) are not "
                       "history parts"),
        ([str(runs / "sync-partition"), "--expect", str(tmp_path / "expect.json")],
         "unknown check(s) in allow: lsot (did you mean lost?); known: lost, "),
    ]
    (tmp_path / "expect.json").write_text(json.dumps({"allow": ["lsot"]}))
    for args, says in cases:
        done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120)
        code, stderr, spark_loaded = json.loads(done.stdout.strip().splitlines()[-1])
        assert code == 2, stderr
        assert says in stderr.replace("\n", ""), stderr
        assert len(stderr.strip().splitlines()) == 1 or "did you mean" in stderr, stderr
        assert not spark_loaded, "nothing of Spark before the input is known to be a history"
