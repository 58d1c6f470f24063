"""``pulsarlab workload run``: recorded traffic through the running cluster, with live counters."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import QuietOpt, StateDirOpt, err, out
from pulsarlab.cli.progress import reporter
from pulsarlab.errors import UsageError, WorkloadFailed

if TYPE_CHECKING:
    from pulsarlab import ops
    from pulsarlab.workload.run import Counters
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")

workload_app = typer.Typer(no_args_is_help=True, help="Drive recorded traffic through the running cluster.")


def counters_line(c: "Counters") -> str:
    return (f"sent {c.invoked}  acked {c.acked}  failed {c.failed}  unknown {c.unknown}  "
            f"in flight {c.in_flight}  received {c.received}  stored {c.stored}")


@workload_app.command("run")
def workload_run(
    out_dir: Annotated[Path, typer.Option("--out", help="history folder for this run (must be new or empty)")],
    topic: Annotated[str, typer.Option(help="full topic name (default: pulsarlab-<run> in the topology's first namespace)")] = "",
    partitions: Annotated[int, typer.Option(help="0 = non-partitioned")] = 0,
    producers: int = 1,
    consumers: int = 1,
    subscription: str = "pulsarlab",
    subscription_type: Annotated[str, typer.Option(help="exclusive|failover|shared|key_shared")] = "shared",
    keys: int = 100,
    rate: Annotated[float, typer.Option(help="messages/s over all producers; 0 = unthrottled")] = 1000.0,
    message_size: Annotated[int, typer.Option(help="bytes")] = 256,
    duration: Annotated[float, typer.Option(
        help="seconds of producing at most: the first Ctrl-C ends sending sooner, and the run still drains and reads "
             "storage back (a second Ctrl-C interrupts)")] = 10.0,
    batching: bool = True,
    deduplication: Annotated[bool, typer.Option(help="broker-side producer deduplication")] = False,
    cluster: Annotated[str | None, typer.Option(help="cluster the producers connect to (default: the first)")] = None,
    consume_cluster: Annotated[
        str | None, typer.Option(help="cluster the consumers connect to (default: the producers'); geo: another one")
    ] = None,
    region: Annotated[str | None, typer.Option(help="region the clients stand in, recorded in the history")] = None,
    client_failover: Annotated[bool, typer.Option(
        help="clients fail over by themselves (the Java client's AutoClusterFailover): from their cluster to the "
             "next one the topic replicates to, and back; the history says which cluster served each event")] = False,
    failover_delay: Annotated[float, typer.Option(help="with --client-failover: seconds a cluster stays unreachable "
                                                        "before the clients leave it")] = 3.0,
    switch_back_delay: Annotated[float, typer.Option(help="with --client-failover: seconds their own cluster must "
                                                          "answer again before the clients go back")] = 10.0,
    fault: Annotated[list[str] | None, typer.Option(
        "--fault", help="'AT ACTION ARGS': a fault AT seconds after the first acknowledged send, e.g. '10 kill bk1-eu' "
                        "(repeatable; each one a row of the history's faults.parquet)")] = None,
    state_dir: StateDirOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Produce and consume while recording every send, ack and delivery; then read storage back.

    On a terminal each phase (driver compile, drivers ready, producing, draining, read-back) and
    the live counters show on stderr. The last lines (stdout) give the counters, the topic and the
    history folder.

    Exit code: 0 the history is complete, 1 nothing was sent, a driver failed or a --fault did not run, 2 usage
    error (a --fault that cannot run on this cluster included).
    """
    try:
        cfg = ops.WorkloadConfig(topic, partitions, producers, consumers, subscription, subscription_type, keys, rate,
                                 message_size, duration, batching, deduplication, client_failover=client_failover,
                                 failover_delay_ms=int(failover_delay * 1000),
                                 switch_back_delay_ms=int(switch_back_delay * 1000))
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    with reporter(err, quiet) as progress:
        schedule = ops.fault_schedule(state_dir, fault, out_dir, say=progress) if fault else None
        progress.begin("counters", "live counters", "waiting for the drivers")
        result = ops.workload_run(state_dir, cfg, out_dir, cluster, region,
                                  tick=lambda c: progress.update("counters", counters_line(c)),
                                  consume_cluster=consume_cluster, progress=progress, schedule=schedule)
        progress.end("counters", counters_line(result.counters))
    out.print(counters_line(result.counters), highlight=False)
    if result.ended_early:
        err.print(f"sending ended before --duration {duration:g}s: {result.ended_early}", highlight=False)
    for e in result.errors[:5]:
        err.print(f"[yellow]driver:[/] {e.splitlines()[0] if e else e}")
    if result.errors:
        err.print(f"[yellow]{len(result.errors)} driver report(s) in {result.out / 'errors.txt'}[/]")
    for d in result.failed:
        err.print(f"[bold red]error:[/] driver {d.name} ({d.mode}) failed: {d.reason}", highlight=False)
    if result.counters.invoked == 0:
        raise WorkloadFailed("no message was sent (see the driver reports above)")
    if result.failed:
        raise WorkloadFailed(f"{len(result.failed)} driver(s) failed: the history in {result.out} "
                             "lacks evidence (its verdict will be inconclusive)")
    if schedule is not None and (schedule.errors or len(schedule.faults) < len(fault or [])):
        from pulsarlab.history.faults import FAULTS_FILE

        ran = len(schedule.faults) - len(schedule.errors)
        raise WorkloadFailed("; ".join([*(f"fault {e}" for e in schedule.errors),
                                        f"{ran} of {len(fault or [])} fault(s) ran (see {result.out / FAULTS_FILE})"]))
    out.print(f"topic {cfg.topic}", highlight=False)
    out.print(f"history in {result.out} ({result.send_rate:.0f} acked sends/s); check it with: pulsarlab verify {result.out}",
              highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(workload_app, name="workload")
