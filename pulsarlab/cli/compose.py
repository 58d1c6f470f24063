"""``pulsarlab compose write``: the compose files of ``compose/`` (plain Docker Compose, no pulsarlab needed)."""

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import StateDirOpt, TopologyOpt, out
from pulsarlab.errors import UsageError
from pulsarlab.topology import BUILTINS, load

if TYPE_CHECKING:
    from pulsarlab import compose_files, ops
else:  # loaded on first use: a command pays only for what it runs
    compose_files = lazy.module("pulsarlab.compose_files")
    ops = lazy.module("pulsarlab.ops")

compose_app = typer.Typer(no_args_is_help=True,
                          help="Compose files that bring up a topology, configured, with plain Docker Compose.")


@compose_app.command("write", context_settings={"allow_extra_args": True})
def write_cmd(
    ctx: typer.Context,
    topologies: Annotated[list[str] | None, typer.Option(
        "--topology", "-t", metavar="<str>",
        help=f"built-in ({', '.join(BUILTINS)}) or a YAML file; again for more (default: every built-in)")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="where <name>.yml files go")] = Path("compose"),
) -> None:
    """Write <name>.yml per topology: nodes, metadata init, racks, a configure service running the
    topology's pulsar-admin commands, Prometheus, and Grafana in the 'monitoring' profile.

    Exit code: 0 written, 1 an invalid topology, 2 usage error.
    """
    if ctx.args:  # the topology is an option on every command
        named = " ".join(f"--topology {shlex.quote(a)}" for a in ctx.args)
        raise UsageError(f"topologies are named with --topology: pulsarlab compose write {named}")
    refs = topologies or list(BUILTINS)
    topos = {Path(r).stem if r.endswith((".yaml", ".yml")) else r: load(r) for r in refs}
    for path in compose_files.write_compose_files(topos, out_dir):
        out.print(str(path), highlight=False)


def attach_cmd(
    topology: TopologyOpt = "smoke",
    state_dir: StateDirOpt = None,
    wait: Annotated[float | None, typer.Option("--timeout", min=0, help="seconds to wait for each node to answer")] = None,
    compose_project: Annotated[str | None, typer.Option(
        "--compose-project", help="the Compose project that runs the nodes (default: the only one found)")] = None,
    inventory: Annotated[Path | None, typer.Option(
        "--inventory", help="the Ansible inventory the nodes were deployed from (playbooks/deploy.yml): "
        "pulsarlab acts on them through playbooks/node.yml")] = None,
    playbooks: Annotated[Path | None, typer.Option(
        "--playbooks", help="the folder of pulsarlab's playbooks, for --inventory (default: the checkout's)")] = None,
) -> None:
    """Attach to a cluster pulsarlab did not start (e.g. 'docker compose -f compose/sync.yml up')
    at the addresses of TOPOLOGY: inspect, configure, workload, verify and monitoring then work
    with --state-dir. With --inventory, node commands, chaos and scenarios (--on) act on the hosts
    of that Ansible inventory (configure.yml attaches so); when a Compose project runs the nodes,
    on its containers; otherwise they are refused. 'down' only detaches.

    Exit code: 0 attached, 1 a node did not answer (named, with what was awaited), 2 usage error
    (also: --compose-project names no project that runs every node; --inventory lacks a node's host).
    """
    name, where, nodes, control = ops.attach(topology, state_dir, wait, compose_project, inventory, playbooks)
    out.print(f"attached to {name} ({len(nodes)} nodes answer) in {where}; {control}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(compose_app, name="compose")
    app.command("attach")(attach_cmd)
