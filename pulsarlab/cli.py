"""The ``pulsarlab`` command: parse, call one function, print. No logic lives here."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from pulsarlab import cli_chaos, cli_compose, cli_monitoring, cli_report, cli_scenario, cli_security, cli_tools, cli_workload, ops
from pulsarlab.cli_common import EXIT_CODES, JsonOpt, StateDirOpt, TopologyOpt, err, out, print_whole, reported
from pulsarlab.cli_progress import QuietOpt, reporter
from pulsarlab.topology import builtin_descriptions

# plain click errors: a bad option value is one "Error: ..." line under the usage, not a drawn box
app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  help=f"Real Apache Pulsar clusters as code.\n\n{EXIT_CODES}")
node_app = typer.Typer(no_args_is_help=True, help="Operate one node of the running cluster.")
app.add_typer(node_app, name="node")
app.add_typer(cli_chaos.app, name="chaos")
app.add_typer(cli_workload.app, name="workload")
app.add_typer(cli_monitoring.app, name="monitoring")
app.add_typer(cli_compose.app, name="compose")


@app.command()
@reported
def topologies(as_json: JsonOpt = False) -> None:
    """List the built-in topologies."""
    desc = builtin_descriptions()
    if as_json:
        print(json.dumps(desc, indent=2))
        return
    table = Table("topology", "description")
    for name, text in desc.items():
        table.add_row(name, text)
    out.print(table)


ImageOpt = Annotated[
    str | None,
    typer.Option(help="docker runtime: the Pulsar image, e.g. apachepulsar/pulsar:4.0.8 (default: 'pulsarlab image build')"),
]


@app.command("render")
@reported
def render_cmd(
    topology: TopologyOpt,
    out_dir: Annotated[Path, typer.Option("--out", help="folder to write into")],
    runtime: Annotated[str, typer.Option(help="local, docker, or ansible (an inventory and each host's files)")] = "local",
    distribution: Annotated[str | None, typer.Option(help="start from this distribution's conf/")] = None,
    image: ImageOpt = None,
    secure: Annotated[bool, typer.Option("--secure", help="with the secure profile (keys are made by 'up')")] = False,
) -> None:
    """Render every node's configuration without starting anything."""
    files = ops.render_topology(topology, out_dir, runtime, distribution, image, secure)
    out.print(f"rendered {len(files)} files into {out_dir}")


@app.command()
@reported
def up(
    topology: TopologyOpt = "smoke",
    runtime: Annotated[str, typer.Option(help="local or docker")] = "local",
    state_dir: StateDirOpt = None,
    distribution: Annotated[str | None, typer.Option(help="a pulsar-server-distribution tarball or folder")] = None,
    apply: Annotated[bool, typer.Option("--apply", help="on a running cluster, fix its differences from the topology")] = False,
    image: ImageOpt = None,
    monitoring: Annotated[bool, typer.Option("--monitoring", help="also a Prometheus scraping every node")] = False,
    quiet: QuietOpt = False,
    secure: Annotated[bool, typer.Option("--secure", help="token auth, authorization and TLS (docs/security.md)")] = False,
) -> None:
    """Start a real Pulsar cluster and wait until a message goes through it.

    On a terminal, progress shows on stderr: the distribution's download, each node from
    starting to ready with its seconds, configure, the first message through.
    On a cluster already running nothing starts and nothing changes: its differences from the
    topology are listed (fixed only with --apply, or by 'pulsarlab configure').
    """
    with reporter(err, quiet) as progress:
        result, cluster = ops.up(topology, runtime, state_dir, distribution, say=progress, apply=apply, image=image,
                                   secure=secure)
    if result.already_running:
        if not result.drift:
            out.print(f"cluster {cluster.topo.name!r} is already running in {cluster.state_dir}; it matches its topology")
        elif result.drift_fixed:
            out.print(f"cluster {cluster.topo.name!r} is already running in {cluster.state_dir}; "
                      f"fixed {len(result.drift)} difference(s) from its topology")
        else:
            out.print(f"cluster {cluster.topo.name!r} is already running in {cluster.state_dir}; nothing changed, but "
                      f"{len(result.drift)} difference(s) from its topology (fix them with --apply or 'pulsarlab configure'):")
            for c in result.drift:
                out.print(f"  {c.cluster} {c.object} {c.field}: {_cell(c.current)} -> {_cell(c.desired)} ({c.action})",
                          highlight=False, markup=False)
    else:
        out.print(f"cluster {cluster.topo.name!r} ready in {result.seconds:.1f}s ({len(result.started)} nodes started)")
    for c in cluster.topo.clusters:
        out.print(f"  {c.name}: {cluster.topo.service_url(c.name)}  {cluster.topo.web_url(c.name)}")
    if monitoring:
        out.print(f"  Prometheus: {cli_monitoring.service.start(cluster).url}")


@app.command()
@reported
def status(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Show every node: pid, address, readiness.

    Exit code: 0 every node ready, 3 some node is not ready, 1 no cluster, 2 usage error.
    """
    report = ops.status(state_dir)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    table = Table("node", "role", "cluster", "region", "address", "pid", "ready", title=f"{report['name']} ({report['runtime']})")
    for n in report["nodes"]:
        state = "[green]ready[/]" if n["ready"] else ("[yellow]paused[/]" if n["paused"] else "[red]no[/]")
        table.add_row(n["name"], n["role"], n["cluster"] or "-", n["region"], n["address"], str(n["pid"] or "-"), state)
    out.print(table)
    for c in report["clusters"]:
        out.print(f"{c['name']}: {c['service_url']}  {c['web_url']}")
    if report["prometheus_url"]:
        out.print(f"Prometheus: {report['prometheus_url']}")
    if not all(n["ready"] for n in report["nodes"]):
        raise typer.Exit(3)


@app.command()
@reported
def down(
    state_dir: StateDirOpt = None,
    keep_data: Annotated[bool, typer.Option("--keep-data", help="keep ZooKeeper and bookie data")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Stop every node by pid; wipe the data unless --keep-data. Nothing running is not an error (exit 0)."""
    with reporter(err, quiet) as progress:
        stopped = ops.down(state_dir, keep_data, say=progress)
    if stopped is None:
        out.print("nothing to stop: no pulsarlab cluster here")
    elif not stopped:
        out.print("nothing to stop: no node was running" + (" (data kept)" if keep_data else " (state cleared)"))
    else:
        out.print(f"stopped {len(stopped)} nodes" + (" (data kept)" if keep_data else ""))


@app.command("verify")
@reported
def verify_cmd(
    directories: Annotated[list[Path], typer.Argument(help="history folders written by 'workload run', judged as one")],
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
    Exit code: 0 pass, 1 a forbidden check failed, 3 inconclusive (evidence missing: the reasons
    are printed), 2 usage error.
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
    for reason in verdict.reasons:
        err.print(f"[yellow]inconclusive:[/] {reason}", highlight=False)
    raise typer.Exit(verdict.exit_code)


inspect_app = typer.Typer(no_args_is_help=True, help="Look at where the running cluster keeps things.")
app.add_typer(inspect_app, name="inspect")


def _cell(value) -> str:
    return "-" if value is None else (json.dumps(value) if isinstance(value, dict | list) else str(value))


@app.command("configure")
@reported
def configure_cmd(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the differences, change nothing")] = False,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Reconcile the running cluster with its topology over the admin REST API."""
    with reporter(err, quiet or as_json) as progress:
        report = ops.configure(state_dir, dry_run, say=progress)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    if not report.changes:
        out.print("nothing to change: the cluster matches its topology")
        return
    table = Table("cluster", "object", "field", "current", "desired", "action",
                  title="differences" + (" (dry run: nothing changed)" if dry_run else " (fixed)"))
    for c in report.changes:
        table.add_row(c.cluster, c.object, c.field, _cell(c.current), _cell(c.desired), c.action)
    out.print(table)
    if report.restarted:
        out.print(f"restarted one at a time: {', '.join(report.restarted)}")


@inspect_app.command("placement")
@reported
def inspect_placement(
    topic: Annotated[str | None, typer.Option(help="one topic, e.g. persistent://mytenant/eu/orders")] = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Owner broker and region of each topic, and the regions of every ledger's copies.

    "under-repl." is pulsarlab's own judgement: a ledger with a copy on a bookie that is not
    registered now. Believe it, not Pulsar's underReplicated flag of the ledger (in --json as
    pulsar_under_replicated, not in the table): Pulsar 4.0.8 reports it true even with every bookie up.
    Exit code: 0 nothing flagged, 4 a placement flag was raised (printed), 1 no cluster, 2 usage error.
    """
    report = ops.inspect_placement(state_dir, topic)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        table = Table("topic", "owner", "region", "ledger", "entries", "ensembles", "regions", "under-repl. (pulsarlab)")
        for t in report.topics:
            owner = f"{t.owner_region}" + (f" (home {t.home_region})" if t.home_region else "")
            for i, led in enumerate(t.ledgers or [None]):
                cells = ["-"] * 5 if led is None else [
                    str(led.ledger_id), str(led.entries),
                    "; ".join(f"{k}: {', '.join(v)}" for k, v in led.ensembles.items()),
                    ", ".join(led.regions), "yes" if led.under_replicated else "no",
                ]
                table.add_row(t.topic if i == 0 else "", t.owner if i == 0 else "", owner if i == 0 else "", *cells)
        print_whole(out, table)
        for f in report.flags:
            err.print(f"[bold red]flag:[/] {f}", highlight=False)
    if report.flags:
        raise typer.Exit(4)


@inspect_app.command("bookies")
@reported
def inspect_bookies(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Entries and bytes each bookie has written and read (its own Prometheus counters)."""
    rows = ops.inspect_bookies(state_dir)
    if as_json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
        return
    table = Table("bookie", "region", "id", "entries added", "entries read", "bytes written", "bytes read")
    for r in rows:
        table.add_row(r.node, r.region, r.bookie_id, f"{r.added_entries:.0f}", f"{r.read_entries:.0f}",
                      f"{r.written_bytes:.0f}", f"{r.read_bytes:.0f}")
    out.print(table)


@inspect_app.command("replication")
@reported
def inspect_replication(
    topic: Annotated[str | None, typer.Option(help="one topic, e.g. persistent://world/global/orders")] = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per topic and direction: the replicator's connection, backlog (entries) and delay (s).

    Exit code 4 when a replicator is not connected."""
    report = ops.inspect_replication(state_dir, topic)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    table = Table("topic", "from", "to", "connected", "backlog", "delay s", "rate out/s")
    for d in report.directions:
        state = "[green]yes[/]" if d.connected else f"[red]no[/]{' (' + d.error + ')' if d.error else ''}"
        table.add_row(d.topic, d.source, d.destination, state, _cell(d.backlog), _cell(d.delay_seconds),
                      "-" if d.rate_out is None else f"{d.rate_out:.1f}")
    out.print(table)
    if not report.directions:
        err.print("no replicated topic yet", highlight=False)
    if any(not d.connected for d in report.directions):
        raise typer.Exit(4)


inventory_app = typer.Typer(no_args_is_help=True, help="Hosts for Ansible: a topology whose nodes name their addresses.")
app.add_typer(inventory_app, name="inventory")


@inventory_app.command("validate")
@reported
def inventory_validate(
    file: Annotated[Path, typer.Argument(help="a topology YAML whose nodes each have an address")],
    json_out: JsonOpt = False,
) -> None:
    """Check a hosts file with the topology model and what real hosts need (an address each, not
    loopback, no two nodes on one address and port). Exit code: 0 valid, 1 not (each problem on a line)."""
    from pulsarlab.ansible.inventory import validate_hosts

    result = validate_hosts(file)
    if json_out:
        print(json.dumps({"valid": result.ok, "problems": result.problems,
                          "summary": result.summary() if result.ok else None}))
    elif result.ok:
        out.print(f"{file}: valid: {result.summary()}")
    else:
        for problem in result.problems:
            print(f"{file}: {problem}", file=sys.stderr)
    if not result.ok:
        raise typer.Exit(1)


image_app = typer.Typer(no_args_is_help=True, help="Pulsar container images, built without any registry.")
app.add_typer(image_app, name="image")


@image_app.command("build")
@reported
def image_build(
    pulsar_version: Annotated[str | None, typer.Option(help="Pulsar version (default: the local runtime's)")] = None,
    distribution: Annotated[str | None, typer.Option(help="a pulsar-server-distribution tarball or folder")] = None,
    tag: Annotated[str | None, typer.Option(help="image tag (default: pulsarlab/pulsar:<version>)")] = None,
    host: Annotated[str | None, typer.Option(help="Docker engine (default: $DOCKER_HOST or scripts/docker-engine's)")] = None,
    prometheus: Annotated[bool, typer.Option("--prometheus", help="instead: Prometheus from Debian's package")] = False,
) -> None:
    """Build a Pulsar image from Debian, its Java 17 and the local runtime's distribution; cached by inputs."""
    from pulsarlab.distribution import DEFAULT_VERSION
    from pulsarlab.runtime.docker.image import ensure_image
    from pulsarlab.runtime.docker.prometheus_image import ensure_prometheus_image

    with reporter(err) as progress:
        result = (ensure_prometheus_image(tag or "pulsarlab/prometheus:debian", host, say=progress) if prometheus
                  else ensure_image(pulsar_version or DEFAULT_VERSION, distribution, tag, host, say=progress))
    if result.built:
        out.print(f"built {result.tag} ({result.image_id[:19]}) in {result.seconds:.1f}s")
    else:
        out.print(f"{result.tag} is up to date ({result.image_id[:19]}): same inputs, nothing built ({result.seconds:.1f}s)")


def _node_cmd(action: str):
    def cmd(name: Annotated[str, typer.Argument(help="node name (bk1), owner:TOPIC, ensemble:TOPIC or region:R")],
            state_dir: StateDirOpt = None, quiet: QuietOpt = False) -> None:
        with reporter(err, quiet) as progress:
            done = ops.node_action(state_dir, name, action, say=progress)
        out.print(done, highlight=False)

    cmd.__doc__ = {
        "stop": "Stop a node gracefully (SIGTERM).",
        "start": "Start a stopped node and wait until it is ready.",
        "kill": "Kill a node at once (SIGKILL).",
        "pause": "Freeze a node (SIGSTOP).",
        "resume": "Thaw a paused node (SIGCONT).",
    }[action]
    return reported(cmd)


for _action in ("stop", "start", "kill", "pause", "resume"):
    node_app.command(_action)(_node_cmd(_action))


cli_tools.register(app)  # env, logs, doctor
cli_security.register(app)  # token create, grant
cli_report.register(app)  # report
cli_scenario.register(app)  # scenario list|run
cli_compose.register(app)  # attach


def main() -> None:  # pragma: no cover - console entry
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    app()
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
