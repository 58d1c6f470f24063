"""The ``pulsarlab`` command: parse, call one function, print. No logic lives here."""

from __future__ import annotations

import functools
import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from pulsarlab import ops
from pulsarlab.errors import PulsarlabError
from pulsarlab.topology import BUILTINS, builtin_descriptions

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Real Apache Pulsar clusters as code.")
node_app = typer.Typer(no_args_is_help=True, help="Operate one node of the running cluster.")
app.add_typer(node_app, name="node")

out = Console()
err = Console(stderr=True)

TopologyOpt = Annotated[str, typer.Option("--topology", "-t", help=f"built-in ({', '.join(BUILTINS)}) or a YAML file")]
StateDirOpt = Annotated[Path | None, typer.Option("--state-dir", help="default: .pulsarlab/<topology name>")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]


def reported(fn):
    """Turn a PulsarlabError into one clear line on stderr and a non-zero exit."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except PulsarlabError as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def _say(msg: str) -> None:
    err.print(f"[dim]·[/] {msg}", highlight=False)


@app.command()
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


@app.command("render")
@reported
def render_cmd(
    topology: TopologyOpt,
    out_dir: Annotated[Path, typer.Option("--out", help="folder to write into")],
    runtime: Annotated[str, typer.Option(help="local")] = "local",
    distribution: Annotated[str | None, typer.Option(help="start from this distribution's conf/")] = None,
) -> None:
    """Render every node's configuration without starting anything."""
    files = ops.render_topology(topology, out_dir, runtime, distribution)
    out.print(f"rendered {len(files)} files into {out_dir}")


@app.command()
@reported
def up(
    topology: TopologyOpt = "smoke",
    runtime: Annotated[str, typer.Option(help="local")] = "local",
    state_dir: StateDirOpt = None,
    distribution: Annotated[str | None, typer.Option(help="a pulsar-server-distribution tarball or folder")] = None,
) -> None:
    """Start a real Pulsar cluster and wait until a message goes through it."""
    result, cluster = ops.up(topology, runtime, state_dir, distribution, say=_say)
    if result.already_running:
        out.print(f"cluster {cluster.topo.name!r} is already running in {cluster.state_dir}; nothing changed")
    else:
        out.print(f"cluster {cluster.topo.name!r} ready in {result.seconds:.1f}s ({len(result.started)} nodes started)")
    for c in cluster.topo.clusters:
        out.print(f"  {c.name}: {cluster.topo.service_url(c.name)}  {cluster.topo.web_url(c.name)}")


@app.command()
@reported
def status(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Show every node: pid, address, readiness."""
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
    if not all(n["ready"] for n in report["nodes"]):
        raise typer.Exit(3)


@app.command()
@reported
def down(
    state_dir: StateDirOpt = None,
    keep_data: Annotated[bool, typer.Option("--keep-data", help="keep ZooKeeper and bookie data")] = False,
) -> None:
    """Stop every node by pid; wipe the data unless --keep-data."""
    stopped = ops.down(state_dir, keep_data, say=_say)
    out.print(f"stopped {len(stopped)} nodes" + (" (data kept)" if keep_data else ""))


def _node_cmd(action: str):
    def cmd(name: Annotated[str, typer.Argument(help="node name, e.g. bk1")], state_dir: StateDirOpt = None) -> None:
        ops.node_action(state_dir, name, action, say=_say)

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


def main() -> None:  # pragma: no cover - console entry
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    app()
    sys.exit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
