"""``pulsarlab inspect placement|bookies|replication``: where the running cluster keeps things."""

import json
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import JsonOpt, StateDirOpt, cell, err, new_table, out, print_whole
from pulsarlab.errors import CheckFailed

if TYPE_CHECKING:
    from pulsarlab import ops
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")

inspect_app = typer.Typer(no_args_is_help=True, help="Look at where the running cluster keeps things.")


@inspect_app.command("placement")
def inspect_placement(
    topic: Annotated[str | None, typer.Option(help="one topic, e.g. persistent://mytenant/eu/orders")] = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Owner broker and region of each topic, and the regions of every ledger's copies.

    "under-repl." is pulsarlab's own judgement: a ledger with a copy on a bookie that is not
    registered now. Believe it, not Pulsar's underReplicated flag of the ledger (in --json as
    pulsar_under_replicated, not in the table): Pulsar 4.0.8 reports it true even with every bookie up.
    Exit code: 0 nothing flagged, 1 a placement flag was raised (printed on stderr) or no cluster, 2 usage error.
    """
    report = ops.inspect_placement(state_dir, topic)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        table = new_table("topic", "owner", "region", "ledger", "entries", "ensembles", "regions", "under-repl. (pulsarlab)")
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
    if report.flags:
        raise CheckFailed("\n".join(f"flag: {f}" for f in report.flags), result_shown=True)


@inspect_app.command("bookies")
def inspect_bookies(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Entries and bytes each bookie has written and read (its own Prometheus counters).

    Exit code 1 when a bookie is not running (named on stderr: it has no counters to show)."""
    rows, down = ops.inspect_bookies(state_dir)
    if as_json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
    else:
        table = new_table("bookie", "region", "id", "entries added", "entries read", "bytes written", "bytes read")
        for r in rows:
            table.add_row(r.node, r.region, r.bookie_id, f"{r.added_entries:.0f}", f"{r.read_entries:.0f}",
                          f"{r.written_bytes:.0f}", f"{r.read_bytes:.0f}")
        out.print(table)
    if down:
        raise CheckFailed(f"not running, no counters: {', '.join(down)}", result_shown=True)


@inspect_app.command("replication")
def inspect_replication(
    topic: Annotated[str | None, typer.Option(help="one topic, e.g. persistent://world/global/orders")] = None,
    state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Per topic and direction: the replicator's connection, backlog (entries) and delay (s).

    Exit code 1 when a replicator is not connected (named on stderr)."""
    report = ops.inspect_replication(state_dir, topic)
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        table = new_table("topic", "from", "to", "connected", "backlog", "delay s", "rate out/s")
        for d in report.directions:
            state = "[green]yes[/]" if d.connected else f"[red]no[/]{' (' + d.error + ')' if d.error else ''}"
            table.add_row(d.topic, d.source, d.destination, state, cell(d.backlog), cell(d.delay_seconds),
                          "-" if d.rate_out is None else f"{d.rate_out:.1f}")
        out.print(table)
        if not report.directions:
            err.print(ops.replication_absent(state_dir), highlight=False)
    down = [f"{d.topic} {d.source} -> {d.destination}" for d in report.directions if not d.connected]
    if down:
        raise CheckFailed(f"replicator not connected: {'; '.join(down)}", result_shown=True)


def register(app: typer.Typer) -> None:
    app.add_typer(inspect_app, name="inspect")
