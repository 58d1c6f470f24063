"""``pulsarlab monitoring up|status|down``: a Prometheus scraping every node, and Grafana provisioning."""

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import JsonOpt, StateDirOpt, new_table, out
from pulsarlab.errors import CheckFailed, Inconclusive
from pulsarlab.monitoring.ports import DEFAULT_PORT

if TYPE_CHECKING:
    from pulsarlab import ops
    from pulsarlab.monitoring import service
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")
    service = lazy.module("pulsarlab.monitoring.service")

monitoring_app = typer.Typer(no_args_is_help=True, help="Prometheus for the running cluster (and Grafana provisioning for it).")

PortOpt = Annotated[int, typer.Option("--port", min=1, max=65535, help="Prometheus's port (on <prefix>.0.9, beside the nodes)")]


@monitoring_app.command("up")
def up_cmd(state_dir: StateDirOpt = None, port: PortOpt = DEFAULT_PORT, as_json: JsonOpt = False) -> None:
    """Start Prometheus for the running cluster and wait until every node's target is up.

    Running again rewrites its configuration and reloads it. Exit code: 0 every target up, 1 Prometheus
    missing or a target still down after the timeout, 2 usage error.
    """
    started = service.start(ops.open_cluster(state_dir), port)
    if as_json:
        print(json.dumps(asdict(started), indent=2))
        return
    out.print(f"Prometheus {started.url} ({len(started.targets)} targets up); Grafana provisioning in {started.grafana}")


@monitoring_app.command("status")
def status_cmd(state_dir: StateDirOpt = None, as_json: JsonOpt = False) -> None:
    """Prometheus's URL and every scrape target's health.

    Exit code: 0 every target up, 1 a target is down (named on stderr), 3 Prometheus is not running
    (nothing to tell health by), 2 usage error."""
    report = service.status(ops.open_cluster(state_dir))
    if as_json:
        print(json.dumps(asdict(report), indent=2))
    elif report.url is None:
        out.print("Prometheus is not running (start it with 'pulsarlab monitoring up')")
    else:
        table = new_table("node", "job", "instance", "health", "last error", title=f"Prometheus {report.url}")
        for t in report.targets:
            table.add_row(t.node, t.job, t.instance, t.health, t.last_error or "-")
        out.print(table)
    if report.url is None:
        raise Inconclusive("Prometheus is not running: no target's health is known", result_shown=True)
    down = [f"{t.node} ({t.job}: {t.last_error or t.health})" for t in report.targets if t.health != "up"]
    if down:
        raise CheckFailed(f"targets not up: {', '.join(down)}", result_shown=True)


@monitoring_app.command("down")
def down_cmd(state_dir: StateDirOpt = None) -> None:
    """Stop Prometheus (its data stays until 'pulsarlab down'). Nothing running is not an error."""
    stopped = service.stop(ops.open_cluster(state_dir))
    out.print("Prometheus stopped" if stopped else "nothing to stop: Prometheus was not running")


def register(app: typer.Typer) -> None:
    app.add_typer(monitoring_app, name="monitoring")
