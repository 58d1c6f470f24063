"""Which bookies run BookKeeper's auto-recovery daemon: pulsarlab's default (the first of each
region, at least two per cluster), the topology's ``autoRecoveryDaemonEnabled`` over it, the
bookie started alone on a fresh cluster, and a cluster left without any refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.ansible.inventory import inventory
from pulsarlab.cli import app
from pulsarlab.compose_files import services
from pulsarlab.errors import TopologyError
from pulsarlab.render import node_dirs, parse_properties, render_node
from pulsarlab.topology import Role, Topology, load, parse

runner = CliRunner()


def running(topo: Topology) -> dict[str, bool]:
    return {b.name: topo.runs_auto_recovery(b) for b in topo.nodes_of(Role.BOOKIE)}


def rendered(topo: Topology, name: str, tmp_path: Path) -> str:
    node = topo.node(name)
    files = render_node(topo, node, node_dirs(tmp_path, node))
    return parse_properties(next(t for p, t in files.items() if p.name == "bookkeeper.conf"))["autoRecoveryDaemonEnabled"]


def test_the_builtins_run_it_on_the_first_bookie_of_each_region_and_two_per_cluster() -> None:
    assert running(load("sync")) == {"bk1-eu": True, "bk2-eu": False, "bk1-us": True, "bk2-us": False}
    assert running(load("smoke")) == {"bk1": True, "bk2": True, "bk3": False}  # one region: two still
    assert all(running(load("geo")).values())  # two bookies per cluster: both
    aa = running(load("active-active"))
    assert [n for n, on in aa.items() if on] == ["bk1-eu-a", "bk1-us-a", "bk1-eu-b", "bk1-us-b"]


def test_false_is_written_out_since_the_distribution_says_true(tmp_path: Path) -> None:
    topo = load("sync")
    assert rendered(topo, "bk1-eu", tmp_path) == "true"
    assert rendered(topo, "bk2-eu", tmp_path) == "false"


def spec(bookie_config: dict[str, dict[str, Any]], top: dict[str, Any] | None = None) -> dict[str, Any]:
    """One cluster over two regions, two bookies in each; ``bookie_config``: node name -> bookie keys."""
    bookies = [("bk1-eu", "eu"), ("bk2-eu", "eu"), ("bk1-us", "us"), ("bk2-us", "us")]
    return {
        "name": "ar", "regions": ["eu", "us"],
        **({"config": {"bookie": top}} if top else {}),
        "nodes": [{"name": "zk", "role": "zookeeper", "region": "eu"},
                  *({"name": n, "role": "bookie", "region": r, "cluster": "c1",
                     **({"config": {"bookie": bookie_config[n]}} if n in bookie_config else {})} for n, r in bookies),
                  {"name": "pulsar1", "role": "broker", "region": "eu", "cluster": "c1"}],
        "clusters": [{"name": "c1", "persistence": {"ensemble": 2, "write_quorum": 2, "ack_quorum": 2}}],
    }


def test_the_topology_decides_over_the_default_and_the_first_bookie_follows(tmp_path: Path) -> None:
    topo = parse(spec({"bk1-eu": {"autoRecoveryDaemonEnabled": False}, "bk2-us": {"autoRecoveryDaemonEnabled": "true"}}))
    assert running(topo) == {"bk1-eu": False, "bk2-eu": False, "bk1-us": True, "bk2-us": True}
    assert rendered(topo, "bk1-eu", tmp_path) == "false" and rendered(topo, "bk2-us", tmp_path) == "true"
    # started alone on a fresh cluster, by every target: the first bookie that runs the daemon
    assert topo.first_bookie("c1").name == "bk1-us"
    assert list(inventory(topo)["all"]["children"]["bookies_first"]["hosts"]) == ["bk1-us"]  # type: ignore[index]
    by_name = {s.name: s for s in services(topo, {})}
    assert set(by_name["bk1-us"].depends) == {"racks"}
    assert all(by_name[b].depends == {"bk1-us": "service_healthy"} for b in ("bk1-eu", "bk2-eu", "bk2-us"))


def test_the_top_level_can_turn_it_on_everywhere() -> None:
    assert all(running(parse(spec({}, top={"autoRecoveryDaemonEnabled": True}))).values())


@pytest.mark.parametrize("where", ["each node", "top level"])
def test_a_cluster_with_no_auto_recovery_bookie_is_refused(tmp_path: Path, where: str) -> None:
    off = {"autoRecoveryDaemonEnabled": False}
    data = spec(dict.fromkeys(["bk1-eu", "bk2-eu", "bk1-us", "bk2-us"], off)) if where == "each node" else spec({}, top=off)
    with pytest.raises(TopologyError, match="no bookie of cluster c1 runs auto-recovery"):
        parse(data)
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["validate", str(path)])
    field = "config.bookie.autoRecoveryDaemonEnabled" if where == "top level" else "clusters[0](c1).config.bookie"
    assert result.exit_code == 2 and f"error: invalid topology: {field}" in result.output and "auto-recovery" in result.output
