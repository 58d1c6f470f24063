"""``pulsarlab scenario list|run``: a thin layer over :mod:`pulsarlab.scenarios`."""

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.handler import exit_with
from pulsarlab.cli.options import JsonOpt, err, new_table, out, print_whole
from pulsarlab.cli.progress import reporter
from pulsarlab.errors import StateError, UsageError

if TYPE_CHECKING:
    from rich.table import Table

    from pulsarlab.scenarios import batch, model, runner
    from pulsarlab.scenarios.verdict import ScenarioVerdict
else:  # loaded on first use: a command pays only for what it runs
    batch = lazy.module("pulsarlab.scenarios.batch")
    model = lazy.module("pulsarlab.scenarios.model")
    runner = lazy.module("pulsarlab.scenarios.runner")

scenario_app = typer.Typer(no_args_is_help=True,
                           help="Fault scenarios on fresh clusters or a running deployment, judged with RPO and RTO.")


def register(app: typer.Typer) -> None:
    app.add_typer(scenario_app, name="scenario")


@scenario_app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """List the built-in scenarios; one that needs a fault action not registered here says which."""
    rows: list[dict[str, Any]] = []
    for name in model.builtin_names():
        try:
            sc = model.load(name)
            rows.append({"name": name, "description": sc.description, "topology": sc.topology.ref,
                         "control": sc.control, "runnable": True, "problem": None})
        except model.ScenarioError as exc:
            rows.append({"name": name, "description": "", "topology": None, "control": None,
                         "runnable": False, "problem": str(exc)})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = new_table("scenario", "topology", "description")
    for r in rows:
        desc = r["description"] if r["runnable"] else f"[yellow]not runnable here:[/] {r['problem']}"
        table.add_row(r["name"] + (" (control)" if r["control"] else ""), r["topology"] or "-", desc)
    out.print(table)


def summary_table(verdicts: "list[ScenarioVerdict]", status: str) -> "Table":
    """One row per run: status, RPO, RTO, acknowledged sends, the checks that counted something, wall time."""
    table = new_table("scenario", "run", "status", "RPO", "max RTO s", "longest without ack s", "acked",
                  "checks > 0", "wall s", title=f"overall: {status.upper()} "
                  f"({len(verdicts)} runs, {sum(v.seconds for v in verdicts):.0f} s of runs)")
    for v in verdicts:
        rto = v.rto or {}
        acked = sum(p.get("acked", 0) for p in rto.get("producers", []))
        counted = v.skipped or " ".join(f"{k}={n}" for k, n in v.checks.items() if n) or "-"
        table.add_row(v.scenario, Path(v.run_dir).name, v.status, str(v.rpo if v.rpo is not None else "-"),
                      str(rto.get("max_recovery_s", "-")), str(rto.get("max_outage_s", "-")),
                      str(acked) if rto else "-", counted, f"{v.seconds:.0f}")
    return table


@scenario_app.command("run")
def run_cmd(
    scenarios: Annotated[list[str] | None, typer.Argument(help="built-in name(s) or scenario YAML file(s)")] = None,
    run_all: Annotated[bool, typer.Option("--all", help="every built-in scenario, one after another")] = False,
    runtime: Annotated[str | None, typer.Option(help="the fresh clusters' runtime: local (default) or docker")] = None,
    on: Annotated[Path | None, typer.Option(
        "--on", help="run on this running deployment (its state folder) instead of fresh clusters: its faults "
                     "are undone afterwards and it keeps running")] = None,
    as_json: JsonOpt = False,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="folder for the run folders (default: a new temporary one)")
    ] = None,
    repeat: Annotated[int, typer.Option(min=1, help="run each scenario N times (each on a fresh cluster, or each on --on)")] = 1,
) -> None:
    """Run scenarios and judge their expectations: each on a fresh cluster taken down afterwards,
    or all on a running deployment (--on) that keeps running, with every fault undone.

    On a running deployment, a scenario it cannot do (a node, namespace or setting it lacks) is
    skipped with the reason; when none can run, that is a usage error before anything runs.

    Exit code: 0 every expectation holds, 1 one fails, 3 inconclusive (evidence missing: the reasons
    are printed), 2 usage error.
    """
    from pulsarlab import ops

    if on is not None and runtime is not None:
        raise UsageError("--runtime chooses the fresh clusters' runtime; with --on the scenarios run where that "
                         "deployment runs (pass one of them)")
    runtime = runtime or "local"
    ops.startable(runtime)
    lab = runner.Lab(ops.up, ops.default_topic, ops.workload_run)  # what a scenario run composes
    refs = list(scenarios or [])
    if run_all == bool(refs):
        raise UsageError("name the scenario(s) to run, or pass --all (not both)")
    target = None
    if on is not None:
        try:
            target = ops.open_cluster(on)
        except StateError as exc:
            raise UsageError(f"--on {on}: {exc}") from None
    out_dir = out_dir or Path(tempfile.mkdtemp(prefix="pulsarlab-scenarios-"))
    plan = batch.plan_runs(refs or model.builtin_names(), repeat, out_dir, on=target)

    def shown(verdict: "ScenarioVerdict", run_dir: Path) -> None:
        if not as_json:
            out.print(verdict.render_table())
            out.print(f"run folder: {run_dir}", highlight=False)

    control = ops.node_control(target, "run scenarios on it") if target is not None else None  # plan_runs checked it
    verdicts = batch.run_plan(plan, lab, runtime, lambda: reporter(err, quiet=as_json), shown, on=control)
    status, agree = batch.overall(verdicts), batch.agreement(verdicts)
    if as_json:
        if len(verdicts) == 1:
            print(json.dumps(verdicts[0].to_json(), indent=2))
        else:
            print(json.dumps({"status": status, "agree": agree if repeat > 1 else None,
                              "runs": [v.to_json() for v in verdicts]}, indent=2))
    else:
        if len(verdicts) > 1:
            print_whole(out, summary_table(verdicts, status))
        if repeat > 1:
            for name, same in agree.items():
                out.print(f"{name}: the {repeat} runs' verdicts {'agree' if same else '[red]DISAGREE[/]'}")
    exit_with(status, f"expectations that do not hold: {'; '.join(batch.failed_expectations(verdicts))}",
              list(batch.reasons(verdicts)))
