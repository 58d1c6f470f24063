"""The cluster's life: ``topologies``, ``render``, ``up``, ``status``, ``configure``, ``node ...``, ``down``."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import ImageOpt, JsonOpt, QuietOpt, StateDirOpt, TopologyOpt, cell, err, new_table, out, print_whole
from pulsarlab.cli.progress import reporter
from pulsarlab.errors import CheckFailed, UsageError
from pulsarlab.topology import builtin_descriptions

if TYPE_CHECKING:
    from pulsarlab import ops
    from pulsarlab.monitoring import service
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")
    service = lazy.module("pulsarlab.monitoring.service")

node_app = typer.Typer(no_args_is_help=True, help="Operate one node of the running cluster.")


def topologies(as_json: JsonOpt = False) -> None:
    """List the built-in topologies."""
    desc = builtin_descriptions()
    if as_json:
        print(json.dumps(desc, indent=2))
        return
    table = new_table("topology", "description")
    for name, text in desc.items():
        table.add_row(name, text)
    out.print(table)


def validate(
    file: Annotated[Path, typer.Argument(help="a topology or a scenario YAML file", exists=True, dir_okay=False)],
    as_json: JsonOpt = False,
    distribution: Annotated[str | None, typer.Option(
        help="check the topology's settings against this distribution (default: the cached release)")] = None,
) -> None:
    """Check a topology or a scenario file without starting anything: every rule that holds
    before a cluster runs (a scenario's topology too). A topology that sets server settings
    (config, jvm_options) has them checked against the Pulsar distribution's own keys and types.

    Exit code: 0 valid, 2 invalid (the field and the rule named)."""
    import yaml

    from pulsarlab.errors import yaml_problem

    try:
        data = yaml.safe_load(file.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"not valid YAML: {yaml_problem(file, exc)}") from None
    if isinstance(data, dict) and "workload" in data:  # a scenario names a workload, a topology never does
        from pulsarlab.scenarios.model import load as load_scenario

        sc = load_scenario(str(file))
        kind, name, topo = "scenario", sc.name, sc.topology_model()
    else:
        topo = ops.load_topology(str(file))
        kind, name = "topology", topo.name
    ops.check_settings(topo, distribution, warn=_warn)
    if as_json:
        print(json.dumps({"file": str(file), "kind": kind, "name": name, "valid": True}))
    else:
        out.print(f"{file}: a valid {kind} ({name})", highlight=False)


def render_cmd(
    topology: TopologyOpt,
    out_dir: Annotated[Path | None, typer.Option("--out", help="folder to write into")] = None,
    runtime: Annotated[str, typer.Option(help="local, docker, or ansible (an inventory and each host's files)")] = "local",
    distribution: Annotated[str | None, typer.Option(help="start from this distribution's conf/")] = None,
    image: ImageOpt = None,
    secure: Annotated[bool, typer.Option("--secure", help="with the secure profile (keys are made by 'up')")] = False,
    explain: Annotated[str | None, typer.Option(
        "--explain", metavar="NODE", help="show each effective value of NODE and where it came from (writes nothing)")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Render every node's configuration without starting anything. A topology's own settings
    (config, jvm_options) are checked against the distribution first.

    --explain NODE: each key of the node's configuration file and JVM option the topology gives,
    with its origin: distribution (the release's shipped file), pulsarlab (its templates),
    topology, cluster NAME or node NAME."""
    if explain is not None:
        rows = ops.explain_node(topology, explain, distribution, secure, warn=_warn)
        if as_json:
            print(json.dumps([{"file": r.file, "key": r.key, "value": r.value, "origin": r.origin} for r in rows], indent=2))
            return
        table = new_table("file", "key", "value", "origin")
        for r in rows:
            table.add_row(r.file, r.key, r.value, r.origin)
        print_whole(out, table)
        return
    if out_dir is None:
        raise UsageError("--out DIR is needed (or --explain NODE)")
    files = ops.render_topology(topology, out_dir, runtime, distribution, image, secure, warn=_warn)
    out.print(f"rendered {len(files)} files into {out_dir}")


def _warn(text: str) -> None:
    err.print(f"warning: {text}", highlight=False, markup=False)


def up(
    topology: TopologyOpt = "smoke",
    runtime: Annotated[str, typer.Option(help="local or docker")] = "local",
    state_dir: StateDirOpt = None,
    distribution: Annotated[str | None, typer.Option(help="a pulsar-server-distribution tarball or folder")] = None,
    pulsar_version: Annotated[str | None, typer.Option(
        "--pulsar-version", metavar="V",
        help="the Pulsar release to run, e.g. 4.0.6 (default: the topology's pulsar_version, else $PULSARLAB_PULSAR_VERSION)",
    )] = None,
    apply: Annotated[bool, typer.Option(
        "--apply", help="on a running cluster, fix its differences from the topology and roll out changed settings "
                        "(dynamic broker keys at once, other nodes restarted one at a time)")] = False,
    image: ImageOpt = None,
    no_build: Annotated[bool, typer.Option(
        "--no-build", help="docker: refuse, instead of building pulsarlab's image when the engine lacks it")] = False,
    monitoring: Annotated[bool, typer.Option("--monitoring", help="also a Prometheus scraping every node")] = False,
    quiet: QuietOpt = False,
    secure: Annotated[bool, typer.Option("--secure", help="token auth, authorization and TLS (docs/security.md)")] = False,
    bind: Annotated[str | None, typer.Option(
        "--bind", metavar="ADDRESS",
        help="put the topology's one broker on this loopback address at its usual ports (localhost: "
             "pulsar://localhost:6650 and http://localhost:8080, where client test suites look for pulsar standalone)",
    )] = None,
) -> None:
    """Start a real Pulsar cluster and wait until a message goes through it.

    On a terminal, progress shows on stderr: the distribution's download, each node from
    starting to ready with its seconds, configure, the first message through. On the docker
    runtime, pulsarlab's image is built first if the engine lacks it (--no-build: refused).
    On a cluster already running nothing starts and nothing changes: its differences from the
    topology are listed, changed server settings with the plan for each node (fixed only with
    --apply, or by 'pulsarlab configure' for the admin-level ones).
    """
    with reporter(err, quiet) as progress:
        result, cluster = ops.up(topology, runtime, state_dir, distribution, say=progress, apply=apply, image=image,
                                 secure=secure, bind=bind, build=not no_build, pulsar_version=pulsar_version,
                                 warn=_warn)
    name, where = cluster.topo.name, cluster.state_dir
    if result.already_running:
        _settings_shown(name, result.settings)
        if not result.drift:
            if result.settings is None:
                out.print(f"cluster {name!r} is already running in {where}; it matches its topology")
        elif result.drift_fixed:
            out.print(f"cluster {name!r} is already running in {where}; "
                      f"fixed {len(result.drift)} difference(s) from its topology")
        else:
            out.print(f"cluster {name!r} is already running in {where}; nothing changed, but {len(result.drift)} "
                      "difference(s) from its topology (fix them with --apply or 'pulsarlab configure'):")
            for c in result.drift:
                out.print(f"  {c.cluster} {c.object} {c.field}: {cell(c.current)} -> {cell(c.desired)} ({c.action})",
                          highlight=False, markup=False)
    else:
        out.print(f"cluster {name!r} ready in {result.seconds:.1f}s ({len(result.started)} nodes started)")
    for c in cluster.topo.clusters:
        out.print(f"  {c.name}: {cluster.topo.service_url(c.name)}  {cluster.topo.web_url(c.name)}")
        if (plain := cluster.topo.plain_service_url(c.name)) is not None:
            out.print(f"  {c.name} (plain text): {plain}  {cluster.topo.plain_web_url(c.name)}")
    if monitoring:
        out.print(f"  Prometheus: {service.start(cluster).url}")


def _settings_shown(name: str, rollout) -> None:
    """A running cluster's settings against its topology: the plan per node, or what was rolled out."""
    if rollout is None:
        return
    if rollout.applied:
        out.print(f"cluster {name!r}: new settings rolled out in {rollout.seconds:.1f}s; restarted one at a time: "
                  f"{', '.join(rollout.restarted) or 'no node'}; set without a restart: "
                  f"{', '.join(rollout.dynamic_set) or 'nothing'}", highlight=False, markup=False)
    else:
        out.print(f"cluster {name!r} runs with other settings than its topology; nothing changed "
                  "(--apply rolls them out: dynamic broker keys at once, other nodes restarted one at a time):",
                  highlight=False, markup=False)
    for change in rollout.changes:
        for line in change.lines():
            out.print(f"  {line}", highlight=False, markup=False)


def ls(as_json: JsonOpt = False) -> None:
    """List the clusters pulsarlab started or attached on this machine, wherever their state
    folders are: name, runtime, topology, state folder, nodes running.

    Exit code: 0 (an empty list too), 1 when a state folder cannot be read (named)."""
    rows = ops.known_clusters()
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        table = new_table("name", "runtime", "topology", "running", "state folder")
        for r in rows:
            running = f"{r['running']}/{r['nodes']}" if r["error"] is None else f"unreadable: {r['error']}"
            table.add_row(r["name"] or "-", r["runtime"] or "-", r["topology"] or "-", running, r["state_dir"])
        print_whole(out, table)  # a folder cut short is no use
    if bad := [r["state_dir"] for r in rows if r["error"] is not None]:
        raise CheckFailed(f"state that cannot be read: {', '.join(bad)}", result_shown=True)


def status(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Show every node: pid, address, readiness, and the Pulsar release it reports running (the
    broker's /admin/v2/brokers/version, ZooKeeper's 'envi', a bookie's JVM class path).

    Exit code: 0 every node ready, 1 some node is not ready (named on stderr) or no cluster, 2 usage error.
    """
    report = ops.status(state_dir)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        upgrading = f", upgrading to {report['upgrading_to']}" if report.get("upgrading_to") else ""
        table = new_table("node", "role", "cluster", "region", "address", "pid", "ready", "version",
                      title=f"{report['name']} ({report['runtime']}, Pulsar {report['pulsar_version'] or '?'}{upgrading})")
        for n in report["nodes"]:
            state = "[green]ready[/]" if n["ready"] else ("[yellow]paused[/]" if n["paused"] else "[red]no[/]")
            table.add_row(n["name"], n["role"], n["cluster"] or "-", n["region"], n["address"], str(n["pid"] or "-"), state,
                          n["version"] or "-")
        out.print(table)
        for c in report["clusters"]:
            out.print(f"{c['name']}: {c['service_url']}  {c['web_url']}")
        if report["prometheus_url"]:
            out.print(f"Prometheus: {report['prometheus_url']}")
    not_ready = [n["name"] for n in report["nodes"] if not n["ready"]]
    if not_ready:
        raise CheckFailed(f"not ready: {', '.join(not_ready)}", result_shown=True)


def down(
    state_dir: StateDirOpt = None,
    keep_data: Annotated[bool, typer.Option("--keep-data", help="keep ZooKeeper and bookie data")] = False,
    quiet: QuietOpt = False,
) -> None:
    """Stop every node by pid and wipe the data (nodes killed at once: nothing is kept), or with
    --keep-data stop each gracefully and keep it. Nothing running is not an error (exit 0)."""
    with reporter(err, quiet) as progress:
        done = ops.down(state_dir, keep_data, say=progress)
    if done is None:
        out.print("nothing to stop: no pulsarlab cluster here")
    elif done.detached:
        out.print(f"detached: pulsarlab only attached to this cluster ({done.detached} runtime), so it stopped "
                  "nothing and its nodes keep running; stop them where they were started")
    elif not done.stopped:
        out.print("nothing to stop: no node was running" + (" (data kept)" if keep_data else " (state cleared)"))
    else:
        out.print(f"stopped {len(done.stopped)} nodes" + (" (data kept)" if keep_data else ""))


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
    table = new_table("cluster", "object", "field", "current", "desired", "action",
                  title="differences" + (" (dry run: nothing changed)" if dry_run else " (fixed)"))
    for c in report.changes:
        table.add_row(c.cluster, c.object, c.field, cell(c.current), cell(c.desired), c.action)
    out.print(table)
    if report.restarted:
        out.print(f"restarted one at a time: {', '.join(report.restarted)}")


NODE_ACTIONS = {
    "stop": "Stop a node gracefully (SIGTERM).",
    "start": "Start a stopped node and wait until it is ready.",
    "kill": "Kill a node at once (SIGKILL).",
    "pause": "Freeze a node (SIGSTOP).",
    "resume": "Thaw a paused node (SIGCONT).",
}


def _node_cmd(action: str):
    def cmd(name: Annotated[str, typer.Argument(help="node name (bk1), owner:TOPIC, ensemble:TOPIC or region:R")],
            state_dir: StateDirOpt = None, quiet: QuietOpt = False) -> None:
        with reporter(err, quiet) as progress:
            done = ops.chaos_action(state_dir, action, [name], say=progress)
        out.print(done, highlight=False)

    cmd.__doc__ = NODE_ACTIONS[action]
    return cmd


def register(app: typer.Typer) -> None:
    app.command()(topologies)
    app.command()(validate)
    app.command("render")(render_cmd)
    app.command()(up)
    app.command()(status)
    app.command()(ls)
    app.command()(down)
    app.command("configure")(configure_cmd)
    for action in NODE_ACTIONS:
        node_app.command(action)(_node_cmd(action))
    app.add_typer(node_app, name="node")
