"""History locations: paths become absolute file:// URIs where they are given, URIs stay as given,
and a location Arrow cannot open is one line naming it, exit code 2, before any JVM starts."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.history.location import LocationError, as_uri, check_folder, local_path, open_location, push, shown
from tests.cluster.handmade import PRODUCER, handmade_history

runner = CliRunner()


def test_a_relative_path_becomes_the_absolute_uri_of_where_it_was_given(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "runs" / "a b#1").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    uri = as_uri("runs/a b#1")
    assert uri == (tmp_path / "runs" / "a b#1").resolve().as_uri() and uri.startswith("file:///")
    monkeypatch.chdir("/")  # another working directory (an executor's) reaches the same folder
    assert local_path(uri) == (tmp_path / "runs" / "a b#1").resolve() and local_path(uri).is_dir()
    filesystem, path = open_location(uri)
    assert filesystem.type_name == "local" and path == str(tmp_path.resolve() / "runs" / "a b#1")


def test_uris_are_kept_as_given() -> None:
    assert as_uri("s3://bucket/runs/a/") == "s3://bucket/runs/a"
    assert as_uri("hdfs://namenode:8020/runs/a") == "hdfs://namenode:8020/runs/a"
    assert as_uri("file:///abs/runs/a") == "file:///abs/runs/a"
    assert shown("s3://bucket/runs/a") == "s3://bucket/runs/a" and shown("file:///abs/x") == "/abs/x"


@pytest.mark.parametrize(("location", "says"), [
    ("foo://bucket/runs/a", "Arrow has no file system for foo://"),
    ("file://otherhost/runs/a", "names no host but localhost"),
])
def test_a_location_arrow_cannot_open_is_one_line_naming_it(location: str, says: str) -> None:
    with pytest.raises(LocationError) as caught:
        local_path(location) if location.startswith("file") else open_location(location)
    assert caught.value.exit_code == 2 and says in str(caught.value) and location in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_remote_uri_is_no_folder_of_this_machine() -> None:
    with pytest.raises(LocationError, match=r"s3://bucket/runs/a is not on this machine's file system"):
        local_path("s3://bucket/runs/a")


def test_check_folder_names_a_file_and_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert check_folder(tmp_path) is None
    said = check_folder(tmp_path / "f")
    assert said == f"no history folder {(tmp_path / 'f').as_uri()}: a file there, expected a run's history folder"
    assert "nothing there" in (check_folder((tmp_path / "none").as_uri()) or "")


def test_push_copies_a_run_to_a_new_folder_only(tmp_path: Path) -> None:
    run = handmade_history(tmp_path / "runs" / "a", messages=10)
    uri, files, size = push(run, (tmp_path / "store" / "a").as_uri())
    copied = sorted(p.name for p in (tmp_path / "store" / "a").iterdir())
    assert uri == (tmp_path / "store" / "a").as_uri() and copied == sorted(p.name for p in run.iterdir())
    assert files == len(copied) and size == sum(p.stat().st_size for p in run.iterdir())
    for name in copied:  # the same rows there
        assert pq.read_table(f"{uri}/{name}").equals(pq.read_table(run / name))
    with pytest.raises(LocationError, match="is not empty"):
        push(run, uri)


@pytest.mark.parametrize("command", [["verify"], ["history", "push", "RUN"]])
def test_the_cli_exits_2_on_a_scheme_arrow_cannot_open(command: list[str], tmp_path: Path) -> None:
    run = handmade_history(tmp_path / "run", messages=10)
    args = [str(run) if a == "RUN" else a for a in command] + ["nosuch://bucket/run"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == ("error: cannot open history location nosuch://bucket/run: Arrow has no file system "
                                     "for nosuch:// (paths, file://, s3://, gs://, abfs:// and hdfs:// are known)")


def test_verify_checks_a_relative_folder_from_the_working_directory(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkdir("empty")
    result = runner.invoke(app, ["verify", "empty"])
    assert result.exit_code == 2 and f"{tmp_path.resolve() / 'empty'} is not a run history" in result.stderr


def test_a_misspelt_file_uri_gets_the_answer_a_misspelt_path_gets(tmp_path: Path) -> None:
    handmade_history(tmp_path / "runs" / "orders", messages=10)
    result = runner.invoke(app, ["verify", (tmp_path / "runs" / "ordrs").as_uri()])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(f"did you mean {tmp_path / 'runs' / 'orders'}?")


def test_a_part_an_executor_cannot_find_is_named_as_such_not_as_damaged(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The map task's own body (what each executor runs), given a part's URI its host does not have:
    the driver says where the history must be instead of calling the part truncated."""
    from pulsarlab.verify.events import Context
    from pulsarlab.verify.parts import missing_on_executor, unreadable_in
    from pulsarlab.verify.reading import Unit, read_unit

    run = handmade_history(tmp_path / "run", messages=10)
    monkeypatch.chdir("/")
    ctx = Context((PRODUCER,), ("eu",), (("eu", "audit"),), ("c0",), True)
    part = run / "producer-p0.parquet"
    found = list(read_unit(Unit(part.as_uri(), (0,), ("producer", "seq"), "send"), ctx))
    assert sum(b.num_rows for b, _ in found) > 0  # from another working directory, by its URI
    gone = (tmp_path / "elsewhere" / "producer-p0.parquet").as_uri()
    with pytest.raises(FileNotFoundError) as caught:
        list(read_unit(Unit(gone, (0,), ("producer", "seq"), "send"), ctx))
    assert unreadable_in(caught.value) is None
    assert missing_on_executor(caught.value) == (
        f"a Spark executor found no history part {gone}, which the driver read: on a cluster of several hosts the "
        "history must be at the same path on every host (a shared mount) or in a store every host reaches "
        "(docs/verify.md)")
