"""The operator's commands beside the cluster ones: ``env`` (URLs out), ``logs`` and ``doctor``."""

import contextlib
import json
import sys
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import JsonOpt, StateDirOpt, TopologyOpt, out
from pulsarlab.errors import CheckFailed, StateError, UsageError

if TYPE_CHECKING:
    from pulsarlab import ops
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")


class EnvFormat(StrEnum):
    shell = "shell"
    json = "json"
    dotenv = "dotenv"


def env_cmd(
    cluster: Annotated[str | None, typer.Option(help="cluster PULSAR_SERVICE_URL/_ADMIN_URL name (default: the first)")] = None,
    fmt: Annotated[EnvFormat, typer.Option("--format", help="shell (for eval), json or dotenv")] = EnvFormat.shell,
    state_dir: StateDirOpt = None,
) -> None:
    """Print the running cluster's URLs as environment variables: eval "$(pulsarlab env)".

    Also writes the Java client's client.conf into the state directory and names it in
    PULSAR_CLIENT_CONF, which the distribution's bin/pulsar-admin and bin/pulsar-perf read.
    Exit code: 0, 1 no cluster, 2 usage error (e.g. an unknown --cluster).
    """
    from pulsarlab.urls import render

    print(render(ops.env(state_dir, cluster).variables, fmt.value))


def logs_cmd(
    node: Annotated[str | None, typer.Argument(help="node name, e.g. bk1 (or --all)")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="then print what the node writes until Ctrl-C")] = False,
    lines: Annotated[int | None, typer.Option("--lines", "-n", min=0, help="at most the last N lines [default: 50]")] = None,
    all_nodes: Annotated[bool, typer.Option("--all", help="every node's log, each line prefixed with its node")] = False,
    since: Annotated[float | None, typer.Option(min=0, help="only what the last SECONDS wrote")] = None,
    follow_for: Annotated[float | None, typer.Option(min=0, help="with -f: stop after SECONDS (default: at Ctrl-C)")] = None,
    state_dir: StateDirOpt = None,
) -> None:
    """Show a node's log, or every node's; -f follows it.

    Exit code: 0, 1 no cluster, no such node or no log yet (a node that has not started here; named),
    2 usage error (NODE and --all together, or neither).
    """
    from pulsarlab import logs

    if (node is None) == (not all_nodes) or (all_nodes and follow):
        raise UsageError("give one NODE, or --all (which does not follow)")
    cluster = ops.open_control(state_dir, "show node logs")
    if all_nodes:
        shown = logs.all_logs(cluster, lines, since)
        for log in shown:
            for text in log.lines:
                print(f"{log.node} | {text}")
        if none := [log for log in shown if log.absent]:
            raise StateError("no log yet (not started here): " + ", ".join(f"{log.node} ({log.path})" for log in none))
        return
    assert node is not None  # checked above: one NODE or --all
    log = logs.tail(cluster, node, lines, since)
    if log.absent and not follow:  # following waits for the node to write its first line
        raise StateError(f"no log of {node} yet: {log.path} does not exist (the node has not started here)")
    for text in log.lines:
        print(text)
    if follow:
        end = time.monotonic() + follow_for if follow_for is not None else None
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how following ends: exit 0
            for text in logs.follow(cluster, node, stop=lambda: end is not None and time.monotonic() > end):
                print(text, flush=True)


def doctor_cmd(topology: TopologyOpt = "smoke", as_json: JsonOpt = False) -> None:
    """Check this machine: Java, javac, Maven, the cached distribution, memory and ports for a
    topology, a Docker engine; say what to do about each missing piece.

    Exit code: 0 everything the local runtime needs is there (Docker is only reported), 1 something is missing.
    """
    from rich.markup import escape

    from pulsarlab import doctor

    checks = doctor.run(topology)
    if as_json:
        print(json.dumps([c.to_dict() for c in checks], indent=2))
    else:
        for c in checks:
            mark = "[green]ok[/]" if c.ok else ("[red]missing[/]" if c.required else "[yellow]absent[/]")
            out.print(f"{c.name:13s} {mark}  {escape(c.found)}", highlight=False, soft_wrap=True)
            if c.fix:
                out.print(f"{'':13s}   [dim]fix:[/] {escape(c.fix)}", highlight=False, soft_wrap=True)
    missing = [c.name for c in checks if c.required and not c.ok]
    if missing:
        raise CheckFailed(f"missing: {', '.join(missing)}", result_shown=True)


def register(app: typer.Typer) -> None:
    app.command("env")(env_cmd)
    app.command("logs")(logs_cmd)
    app.command("doctor")(doctor_cmd)
