"""``pulsarlab upgrade --to V``: a rolling upgrade or rollback of the running deployment."""

import json
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import JsonOpt, QuietOpt, StateDirOpt, err, new_table, out
from pulsarlab.cli.progress import reporter

if TYPE_CHECKING:
    from pulsarlab import ops
else:
    ops = lazy.module("pulsarlab.ops")


def upgrade(
    to: Annotated[str, typer.Option("--to", metavar="V", help="the Pulsar release to move to (older: a rollback)")],
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Move the running cluster to another Pulsar release, one node at a time: ZooKeeper, the
    bookies, the brokers, each gated as playbooks/upgrade.yml gates it (the order and gates are one
    file both read). A node that already reports the release is left alone, so a run stopped
    half-way continues when run again; an older release is a rollback, the same way.

    Exit code: 0 every node on the release; 1 refused (a node not serving, a ledger
    under-replicated: no node touched) or a node failed (the others keep serving); 2 a release that
    cannot be resolved (no node touched) or usage; 130 interrupted.
    """
    with reporter(err, quiet or as_json) as progress:
        result = ops.upgrade(state_dir, to, say=progress)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    table = new_table("node", "role", "before", "after", "action", "seconds", "gates (s)", title=f"upgrade to {result.target}")
    for n in result.nodes:
        gates = ", ".join(f"{g} {s:.1f}" for g, s in n.gates.items()) or "-"
        table.add_row(n.node, n.role, n.before or "-", n.after or "-", n.action,
                      f"{n.seconds:.1f}" if n.action == "moved" else "-", gates)
    out.print(table)
    moved = sum(n.action == "moved" for n in result.nodes)
    out.print(f"every node on Pulsar {result.target} in {result.seconds:.1f}s ({moved} moved, "
              f"{len(result.nodes) - moved} already on it)", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(upgrade)
