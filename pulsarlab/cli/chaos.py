"""``pulsarlab chaos ...``: break the running cluster now (the faults themselves live in
:mod:`pulsarlab.chaos`; see docs/chaos.md)."""

import json
import time
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import JsonOpt, StateDirOpt, err, out
from pulsarlab.cli.progress import reporter

if TYPE_CHECKING:
    from pulsarlab import ops
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")

chaos_app = typer.Typer(no_args_is_help=True, help="Inject a fault into the running cluster now (see docs/chaos.md).")

Target = Annotated[str, typer.Argument(help="a node name, owner:TOPIC, ensemble:TOPIC or region:R")]
Region = Annotated[str, typer.Argument(help="a region of the topology, e.g. eu")]


def _run(action: str, args: list[str], state_dir, as_json: bool) -> None:
    t0, wall = time.monotonic(), time.time_ns()
    with reporter(err, quiet=as_json) as progress:  # on a terminal only, never mixed with JSON
        done = (ops.chaos_heal(state_dir, say=progress) if action == "heal"
                else ops.chaos_action(state_dir, action, args, say=progress))
    if as_json:
        print(json.dumps({"action": action, "args": args, "done": done, "wall_ns": wall,
                          "seconds": round(time.monotonic() - t0, 3)}, indent=2))
    else:
        out.print(done, highlight=False)


@chaos_app.command("region-loss")
def region_loss(region: Region, state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Kill (SIGKILL) every node of a region at the same moment."""
    _run("region-loss", [region], state_dir, as_json)


@chaos_app.command()
def partition(region_a: Region, region_b: Region, state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Drop every packet between two regions' nodes, both ways (iptables; needs root). Undo with 'chaos heal'."""
    _run("partition", [region_a, region_b], state_dir, as_json)


@chaos_app.command()
def heal(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Remove every packet filter rule this deployment added (and no other), on this machine or its
    hosts, and resume every node left paused: the cleanup after faults, a crashed run's too; safe to re-run."""
    _run("heal", [], state_dir, as_json)


@chaos_app.command("isolate-zk")
def isolate_zk(target: Target, state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Drop a node's packets to and from every ZooKeeper node (iptables; needs root)."""
    _run("isolate-zk", [target], state_dir, as_json)


@chaos_app.command("mute")
def mute(target: Target, state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Drop everything a node sends back to clients while it keeps writing to bookies: sends are
    stored but never acknowledged (iptables; needs root; undone by heal)."""
    _run("mute", [target], state_dir, as_json)


@chaos_app.command("disconnect")
def disconnect(target: Target, state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Destroy every client connection to a broker's service port (ss -K; needs root): clients
    reconnect and resend what they have pending."""
    _run("disconnect", [target], state_dir, as_json)


@chaos_app.command("power-loss")
def power_loss(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Kill every node at the same moment, then start them all and wait until they are ready."""
    _run("power-loss", [], state_dir, as_json)


@chaos_app.command("disk-loss")
def disk_loss(target: Target, state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Kill a bookie, remove its data and cookie, and start it again empty."""
    _run("disk-loss", [target], state_dir, as_json)


@chaos_app.command("await-replicated")
def await_replicated(
    topic: Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic")],
    timeout: Annotated[float, typer.Option(min=0, help="seconds to wait")] = 120.0,
    state_dir: StateDirOpt = None, as_json: JsonOpt = False,
) -> None:
    """Wait until auto-recovery has every ledger of the topic fully replicated across its regions."""
    _run("await-replicated", [topic, str(timeout)], state_dir, as_json)


def register(app: typer.Typer) -> None:
    app.add_typer(chaos_app, name="chaos")
