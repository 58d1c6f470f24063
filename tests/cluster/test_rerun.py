"""``up`` on a running cluster starts nothing and changes nothing: it names what differs from the
topology, and fixes it only with ``--apply``."""

from __future__ import annotations

from typer.testing import CliRunner

from pulsarlab import ops, topology
from pulsarlab.admin.client import AdminClient
from pulsarlab.cli import app
from pulsarlab.runtime.local import LocalCluster

runner = CliRunner()


def said(result) -> str:
    return " ".join(result.stdout.split())  # the console wraps at 80 columns


def test_up_on_a_running_cluster_reports_drift_and_fixes_it_only_with_apply(smoke: LocalCluster) -> None:
    admin = AdminClient(smoke.admin_url("smoke"))
    bookie_id = topology.bookie_id(smoke.topo, smoke.topo.node("bk1"))
    assert bookie_id not in admin.racks(), "smoke's topology gives its bookies no rack"
    pids = {name: rec.pid for name, rec in smoke.state.nodes.items()}
    args = ["up", "--topology", str(smoke.state_dir / "topology.yaml"), "--state-dir", str(smoke.state_dir)]
    admin.set_rack(bookie_id, "elsewhere", "/elsewhere")  # added by hand
    try:
        shown = runner.invoke(app, args)
        assert shown.exit_code == 0, shown.output
        assert "nothing changed, but" in said(shown) and f"rack {bookie_id}" in said(shown)
        assert admin.racks()[bookie_id].rack.strip("/") == "elsewhere", "up changed a running cluster without --apply"
        fixed = runner.invoke(app, [*args, "--apply"])
        assert fixed.exit_code == 0, fixed.output
        assert "fixed 1 difference" in said(fixed) and bookie_id not in admin.racks()
        again = runner.invoke(app, args)
        assert "it matches its topology" in said(again)
    finally:
        ops.configure(smoke.state_dir)
    assert {name: rec.pid for name, rec in LocalCluster.open(smoke.state_dir).state.nodes.items()} == pids
