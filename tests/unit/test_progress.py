"""Progress reporting and the verdict's display, without a cluster: what a terminal shows, what a
pipe or ``--quiet`` does not, and how a verdict's times and names read."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from pulsarlab import distribution
from pulsarlab.cli import app
from pulsarlab.cli.options import print_whole, width_needed
from pulsarlab.cli.progress import reporter
from pulsarlab.cli.rich_progress import RichReporter
from pulsarlab.progress import NO_PROGRESS, Reporter, SayReporter, human_bytes, reporter_of
from pulsarlab.verify.display import example_lines, shown_value, table, utc_time
from pulsarlab.verify.model import CHECKS, Check, Verdict

runner = CliRunner()


def _terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=120, color_system=None), buf


def test_terminal_gets_the_rich_display_and_a_pipe_or_quiet_gets_nothing() -> None:
    console, _ = _terminal()
    with reporter(console) as shown:
        assert isinstance(shown, RichReporter)
    with reporter(console, quiet=True) as quiet:
        assert quiet is NO_PROGRESS
    with reporter(Console(file=io.StringIO())) as piped:  # a file is no terminal
        assert piped is NO_PROGRESS


def test_each_step_shows_its_label_status_and_end() -> None:
    console, buf = _terminal()
    with reporter(console) as progress:
        progress.begin("bk1", "bk1", "starting")
        progress.update("bk1", "started (pid 42, 127.0.0.2)")
        progress.end("bk1", "ready (3.2s)")
        progress.begin("zk", "zk", "starting")
        progress.end("zk", "not ready", ok=False)
        progress.note("Pulsar 4.0.8 from /cache [x]")
    text = buf.getvalue()
    assert "bk1" in text and "ready (3.2s)" in text and "✓" in text
    assert "not ready" in text and "✗" in text
    assert "Pulsar 4.0.8 from /cache [x]" in text  # a note is printed as it is, never read as markup


def test_the_clis_console_made_on_first_use_draws_the_display_like_a_console(monkeypatch) -> None:
    """The CLI's consoles wait for their first use (rich stays out of --help); handed to the live
    display, which enters its console as a context, and to a wide table, they act as the real one."""
    from pulsarlab.cli import options

    console, buf = _terminal()
    monkeypatch.setattr(options, "_console", lambda stderr=False: console)
    waiting = options._OnFirstUse(stderr=True)
    with reporter(waiting) as progress:  # type: ignore[arg-type]
        assert isinstance(progress, RichReporter) and progress.progress.console is console
        progress.begin("bk1", "bk1", "starting")
        progress.end("bk1", "ready (3.2s)")
    assert "ready (3.2s)" in buf.getvalue() and "✓" in buf.getvalue()
    wide = Console(file=io.StringIO(), width=40)
    monkeypatch.setattr(options, "_console", lambda stderr=False: wide)
    row = "x" * 60
    print_whole(options._OnFirstUse(stderr=False), table_of(row))  # type: ignore[arg-type]
    assert row in wide.file.getvalue()  # type: ignore[attr-defined]


def table_of(value: str):  # type: ignore[no-untyped-def]
    from rich.table import Table

    t = Table("name")
    t.add_row(value)
    return t


def test_a_step_that_raises_ends_failed_and_the_error_goes_on() -> None:
    said: list[str] = []
    progress = SayReporter(said.append)
    try:
        with progress.step("compile", "compiling the driver", "javac", "compiled"):
            raise RuntimeError("javac exploded")
    except RuntimeError:
        pass
    with progress.step("unpack", "unpacking x.tar.gz", "unpacking", "unpacked"):
        pass
    assert said[0].startswith("compiling the driver failed after ")
    assert said[1].startswith("unpacking x.tar.gz unpacked (")


def test_a_plain_say_gets_status_and_end_lines_but_not_byte_counts() -> None:
    said: list[str] = []
    progress = reporter_of(said.append)
    progress.begin("bk1", "bk1", "starting")
    progress.update("bk1", "started (pid 42)")
    progress.update("bk1", completed=1000)
    progress.end("bk1", "ready (1.0s)")
    progress("cluster up")
    assert said == ["bk1 started (pid 42)", "bk1 ready (1.0s)", "cluster up"]
    assert reporter_of(progress) is progress and reporter_of(None) is NO_PROGRESS


def test_download_bytes_are_the_growing_part_file(tmp_path: Path) -> None:
    tarball = tmp_path / "pulsar-server-distribution-4.0.8-bin.tar.gz"
    seen: list[float] = []

    class Recorder(Reporter):
        def update(self, key, status=None, completed=None):
            if completed is not None:
                seen.append(completed)

    def grow() -> None:
        part = tarball.with_name(tarball.name + ".part")
        for _ in range(6):
            with open(part, "ab") as fh:
                fh.write(b"x" * 1000)
            time.sleep(0.05)  # deliberate: a download that grows over several of the watcher's ticks
        part.rename(tarball)

    with distribution.watching_download(tarball, Recorder(), interval=0.02):
        writer = threading.Thread(target=grow)
        writer.start()
        writer.join()
    assert seen and max(seen) <= 6000 and seen == sorted(seen)
    assert distribution.downloaded_bytes(tarball) == 6000
    assert human_bytes(253_400_000) == "253.4 MB" and human_bytes(512) == "512 B"


def _verdict() -> Verdict:
    checks = [Check(n, 0) for n in CHECKS]
    checks[0] = Check("lost", 1, [{"producer": "r1-p0", "seq": 5, "ok_ts": 1_800_000_000_503_000_000}])
    metrics = {
        "messages": {"sent": 40_000, "acknowledged": 40_000},
        "publish_latency_ms": {"p50": 3.0, "max": 120.5},
        "replication_delay_ms": {"cluster-us-with-a-long-name": {"p99_9": 7.25, "count": 20}},
        "throughput_msgs_per_s": 10.256,
        "longest_gap_without_ack_s": {"seconds": 0.1, "from_ts": 1_800_000_000_003_000_000, "to_ts": 1_800_000_000_103_000_000},
    }
    return Verdict(["/runs/1"], checks, metrics)


def test_instants_read_as_utc_times_and_durations_carry_their_unit() -> None:
    assert utc_time(1_800_000_000_503_000_000) == "2027-01-15T08:00:00.503Z"
    shown = dict(zip(*(c.cells for c in table(_verdict()).columns[:2]), strict=True))
    assert shown["longest_gap_without_ack_s.from_ts"] == "2027-01-15T08:00:00.003Z"
    assert shown["longest_gap_without_ack_s.seconds"] == "0.100 s"
    assert shown["publish_latency_ms.p50"] == "3.000 ms" and shown["publish_latency_ms.max"] == "120.500 ms"
    assert shown["replication_delay_ms.cluster-us-with-a-long-name.p99_9"] == "7.250 ms"
    assert shown["replication_delay_ms.cluster-us-with-a-long-name.count"] == "20"
    assert shown["throughput_msgs_per_s"] == "10.3 /s" and shown["messages.sent"] == "40,000"
    assert shown_value("x.first_ack_ts", None) == "-"
    assert example_lines(_verdict()) == ["lost, first example: ok_ts=2027-01-15T08:00:00.503Z producer=r1-p0 seq=5"]


def test_metric_names_stay_whole_on_an_80_column_pipe() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=80)  # what rich assumes when stdout is not a terminal
    t = table(_verdict())
    assert width_needed(console, t) > 80
    print_whole(console, t)
    text = buf.getvalue()
    assert "replication_delay_ms.cluster-us-with-a-long-name.p99_9" in text and "…" not in text


def test_verify_json_keeps_raw_values_and_no_progress(tmp_path: Path, monkeypatch) -> None:
    from pulsarlab import ops

    monkeypatch.setattr(ops, "verify_history", lambda *a, progress=None, **k: _verdict())
    result = runner.invoke(app, ["verify", str(tmp_path), "--json"])
    import json

    data = json.loads(result.stdout)  # the whole of stdout is one JSON document
    assert data["metrics"]["longest_gap_without_ack_s"]["from_ts"] == 1_800_000_000_003_000_000
    assert result.exit_code == 1 and "\x1b[" not in result.output


def test_verify_table_on_a_pipe_is_plain_and_names_are_whole(tmp_path: Path, monkeypatch) -> None:
    from pulsarlab import ops

    monkeypatch.setattr(ops, "verify_history", lambda *a, progress=None, **k: _verdict())
    result = runner.invoke(app, ["verify", str(tmp_path)])
    assert "replication_delay_ms.cluster-us-with-a-long-name.p99_9" in result.stdout
    assert "2027-01-15T08:00:00.003Z" in result.stdout and "1800000000003000000" not in result.stdout
    assert "lost, first example: ok_ts=2027-01-15T08:00:00.503Z" in result.stdout
    assert "\x1b[" not in result.output and result.stderr == "failed: forbidden checks counted: lost=1\n"


def test_quiet_is_an_option_of_every_long_command() -> None:
    for args in (["up"], ["down"], ["configure"], ["verify"], ["workload", "run"], ["node", "start"]):
        shown = runner.invoke(app, [*args, "--help"], terminal_width=200)
        assert shown.exit_code == 0 and "--quiet" in shown.stdout, args


def test_down_quiet_with_nothing_running_exits_0(tmp_path: Path) -> None:
    result = runner.invoke(app, ["down", "--quiet", "--state-dir", str(tmp_path / "none")])
    assert result.exit_code == 0 and "nothing to stop" in result.stdout and result.stderr == ""


def test_placement_help_says_which_under_replicated_flag_to_believe() -> None:
    shown = runner.invoke(app, ["inspect", "placement", "--help"], terminal_width=200)
    assert "pulsar_under_replicated" in shown.stdout and "Believe it" in shown.stdout


def _fake_workload(calls: list[str]):
    from pulsarlab.workload.run import Counters, WorkloadResult

    def run(state_dir, cfg, out, *a, tick=None, progress=None, **k):  # what ops.workload_run reports, in order
        cfg.topic = cfg.topic or "persistent://smoke/test/pulsarlab-r1"
        with progress.step("produce", "producing for 1s", "sending", "sent"):
            tick(Counters(invoked=5, acked=4))
        calls.append(type(progress).__name__)
        return WorkloadResult(out, Counters(invoked=10, acked=10, received=10, stored=10), 1.0, 10.0)

    return run


def test_workload_on_a_pipe_prints_results_naming_the_topic_and_no_progress(tmp_path: Path, monkeypatch) -> None:
    from pulsarlab import ops

    calls: list[str] = []
    monkeypatch.setattr(ops, "workload_run", _fake_workload(calls))
    result = runner.invoke(app, ["workload", "run", "--out", str(tmp_path / "run"), "--duration", "1"])
    assert result.exit_code == 0, result.output
    assert calls == ["Reporter"]  # the reporter that says nothing: stderr is no terminal here
    assert "topic persistent://smoke/test/pulsarlab-r1" in result.stdout and "sent 10  acked 10" in result.stdout
    assert result.stderr == "" and "\x1b[" not in result.output


def test_workload_on_a_terminal_shows_phases_and_live_counters(tmp_path: Path, monkeypatch) -> None:
    from pulsarlab import ops
    from pulsarlab.cli import handler, workload

    console, buf = _terminal()
    calls: list[str] = []
    monkeypatch.setattr(ops, "workload_run", _fake_workload(calls))
    monkeypatch.setattr(workload, "err", console)
    monkeypatch.setattr(handler, "err", console)
    result = runner.invoke(app, ["workload", "run", "--out", str(tmp_path / "run"), "--duration", "1"])
    assert result.exit_code == 0, result.output
    assert calls == ["RichReporter"]
    shown = buf.getvalue()
    assert "producing for 1s" in shown and "sent (" in shown
    assert "sent 5  acked 4" in shown or "sent 10  acked 10" in shown  # the counters line, live then final
    quiet_calls: list[str] = []
    monkeypatch.setattr(ops, "workload_run", _fake_workload(quiet_calls))
    runner.invoke(app, ["workload", "run", "--out", str(tmp_path / "run2"), "--duration", "1", "--quiet"])
    assert quiet_calls == ["Reporter"]
