"""``pulsarlab verify DIR...``: the PySpark verdict over one or several histories."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.handler import exit_with
from pulsarlab.cli.options import JsonOpt, QuietOpt, err, out, print_whole
from pulsarlab.cli.progress import reporter

if TYPE_CHECKING:
    from pulsarlab import ops
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")


def verify_cmd(
    directories: Annotated[list[str], typer.Argument(
        help="history folders written by 'workload run', judged as one: paths or file:// URIs", metavar="DIR|URI...")],
    as_json: JsonOpt = False,
    master: Annotated[str | None, typer.Option(help="Spark master URL (default local[*])")] = None,
    expect: Annotated[Path | None, typer.Option(help="YAML/JSON of the checks allowed to be non-zero")] = None,
    verdict_out: Annotated[
        Path | None, typer.Option("--out", help="write the verdict here (default: DIR/verdict.json for one folder)")
    ] = None,
    driver_memory: Annotated[str | None, typer.Option(help="Spark driver heap, e.g. 4g (default: RAM/4, 1g..8g)")] = None,
    executor_python: Annotated[
        str | None, typer.Option(help="Python the Spark workers run (default: this one; must exist on every executor host)")
    ] = None,
    quiet: QuietOpt = False,
) -> None:
    """Check histories with PySpark: lost, duplicated, corrupted, unexpected, reordered, never delivered.

    Times show as UTC and durations in s/ms; --json and verdict.json keep the raw values
    (nanoseconds since the epoch). Spark's own log goes to spark.log beside the verdict.
    Exit code: 0 pass, 1 a forbidden check failed (named on stderr), 3 inconclusive (evidence
    missing: the reasons are printed on stderr), 2 usage error.
    """
    from pulsarlab.verify.display import example_lines  # the package loads Spark: not at startup

    with reporter(err, quiet or as_json) as progress:
        verdict = ops.verify_history(directories, master, expect, verdict_out, driver_memory=driver_memory,
                                     executor_python=executor_python, progress=progress)
    if as_json:
        print(json.dumps(verdict.to_json(), indent=2))
    else:
        print_whole(out, verdict.render_table())
        for line in example_lines(verdict):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    failed = ", ".join(f"{c.name}={c.count}" for c in verdict.checks if not c.passed)
    exit_with(verdict.status, f"forbidden checks counted: {failed}", verdict.reasons)


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_cmd)
