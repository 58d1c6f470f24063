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


def test_a_namespace_deduplication_of_the_topology_is_written_once_and_read_back(smoke: LocalCluster) -> None:
    """``namespaces[].deduplication`` reaches the namespace's policies through configure (it was
    ignored before), a second configure writes nothing, and a workload asking for what is there
    writes no policy (each write makes every broker re-check every loaded topic of the namespace)."""
    from pulsarlab.admin import reconcile

    admin = AdminClient(smoke.admin_url("smoke"))
    ns = smoke.topo.namespaces[0].name
    assert "deduplicationEnabled" not in (admin.namespace_policies(ns) or {})
    wanting = LocalCluster.open(smoke.state_dir)
    wanting.topo = smoke.topo.model_copy(deep=True)
    wanting.topo.namespaces[0].deduplication = True
    try:
        first = reconcile.configure(wanting)
        assert [(c.object, c.field, c.desired) for c in first.changes] == [
            (f"deduplication {ns}", "deduplicationEnabled", True)], first.changes
        assert (admin.namespace_policies(ns) or {}).get("deduplicationEnabled") is True
        assert reconcile.configure(wanting).changes == []
        assert admin.ensure_deduplication(ns, True) is False
    finally:
        admin.request("DELETE", f"/admin/v2/namespaces/{ns}/deduplication", idempotent=True)
    assert "deduplicationEnabled" not in (admin.namespace_policies(ns) or {})
    assert ops.configure(smoke.state_dir).changes == []  # the pool's own topology says nothing of it
