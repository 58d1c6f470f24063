"""The rolling upgrade's pure rules: the shared order file, the plan (who moves, in which order, who
is left alone), the refusals, and reading a node's release from what it reports."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pulsarlab.errors import TopologyError
from pulsarlab.runtime import versions
from pulsarlab.topology import Role, load, parse
from pulsarlab.upgrade.plan import GATES, ORDER_FILE, load_order, node_files_dir, parse_order, plan, refusals

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def test_the_order_is_pulsars_documented_one_and_every_gate_is_known() -> None:
    order = load_order()
    assert [t.role for t in order.tiers] == [Role.ZOOKEEPER, Role.BOOKIE, Role.BROKER]
    assert order.tier(Role.BOOKIE).after_start == ("ready", "restore_recovery_delay", "no_underreplicated_ledger")
    assert order.tier(Role.BROKER).before_stop == ("unload_bundles",)
    assert set(order.before) == {"every_node_serving", "no_underreplicated_ledger"}
    assert order.recovery_delay_s == 300


def test_the_playbook_reads_the_same_file() -> None:
    """One description: upgrade.yml takes its tiers' hosts and gates from the file pulsarlab reads."""
    assert node_files_dir() == PLAYBOOKS / "roles" / "pulsar_node" / "files"
    book = (PLAYBOOKS / "upgrade.yml").read_text()
    assert f"roles/pulsar_node/files/{ORDER_FILE}" in book
    for i in range(3):
        assert f"pulsar_upgrade.tiers[{i}]" in book


def test_an_unknown_gate_or_a_missing_role_is_refused() -> None:
    data = yaml.safe_load((node_files_dir() / ORDER_FILE).read_text())
    data["pulsar_upgrade"]["tiers"][1]["after_start"].append("pray")
    with pytest.raises(ValueError, match="unknown gate.*pray"):
        parse_order(data)
    data = yaml.safe_load((node_files_dir() / ORDER_FILE).read_text())
    del data["pulsar_upgrade"]["tiers"][2]
    with pytest.raises(ValueError, match="every role once"):
        parse_order(data)
    assert set(GATES) >= {"ready", "unload_bundles"}


def test_plan_moves_each_node_in_tier_order_and_keeps_those_on_the_target() -> None:
    topo = load("sync")
    reported: dict[str, str | None] = {n.name: "4.0.6" for n in topo.nodes}
    reported["zk"] = reported["bk1-eu"] = "4.0.8"  # a first run stopped after bk1-eu
    steps = plan(load_order(), topo, reported, "4.0.8")
    assert [s.node for s in steps] == ["zk", "bk1-eu", "bk2-eu", "bk1-us", "bk2-us",
                                       "pulsar1-eu", "pulsar2-eu", "pulsar1-us", "pulsar2-us"]
    assert [s.node for s in steps if s.action == "keep"] == ["zk", "bk1-eu"]
    assert all(s.running == "4.0.6" for s in steps if s.action == "move")


def test_a_rollback_is_the_same_plan_towards_the_older_release() -> None:
    topo = load("smoke")
    steps = plan(load_order(), topo, {n.name: "4.0.8" for n in topo.nodes}, "4.0.6")
    assert [s.action for s in steps] == ["move"] * 5
    assert plan(load_order(), topo, {n.name: "4.0.6" for n in topo.nodes}, "4.0.6")[0].action == "keep"


def test_refusals_name_every_reason_before_anything_is_touched() -> None:
    order = load_order()
    ok = {"zk": True, "bk1": True, "bk2": False, "pulsar1": True}
    reported: dict[str, str | None] = {"zk": "4.0.6", "bk1": None, "bk2": None, "pulsar1": "4.0.6"}
    problems = refusals(order, reported, ok, {"smoke": [12, 14]})
    assert problems == ["not serving: bk2", "no release reported by bk1",
                        "cluster smoke: under-replicated ledger(s) 12, 14"]
    assert refusals(order, {"zk": "4.0.6"}, {"zk": True}, {"smoke": []}) == []


def test_a_topology_names_its_release_and_a_bad_one_is_refused() -> None:
    data = yaml.safe_load((Path(load.__code__.co_filename).parent / "builtin" / "smoke.yaml").read_text())
    assert parse({**data, "pulsar_version": "4.0.6"}).pulsar_version == "4.0.6"
    with pytest.raises(TopologyError, match="pulsar_version"):
        parse({**data, "pulsar_version": "latest"})


def test_versions_are_read_from_what_each_node_reports(tmp_path: Path) -> None:
    envi = "java.class.path=/c/classpath:::/d/lib/org.apache.pulsar-pulsar-broker-common-4.0.8.jar:" \
           "/d/lib/org.apache.pulsar-pulsar-broker-4.0.8.jar:/d/lib/x.jar"
    assert versions.BROKER_JAR.search(envi).group(1) == "4.0.8"  # type: ignore[union-attr]
    lib = tmp_path / "apache-pulsar-4.0.6" / "lib"
    lib.mkdir(parents=True)
    (lib / "org.apache.pulsar-pulsar-broker-4.0.6.jar").touch()
    (lib / "org.apache.pulsar-pulsar-broker-auth-oidc-4.0.6.jar").touch()
    args = ["/usr/bin/java", "-Xmx1g", "-cp", f"/c/classpath:::{lib}/*", "org.apache.bookkeeper.server.Main"]
    assert versions.from_command_line(args) == versions.Reported("4.0.6", versions.BOOKIE_SOURCE)
    assert versions.from_command_line(None).version is None
    assert versions.from_command_line(["java", "-cp", "/nowhere/*"]).version is None
    # a container's JVM: its class path names its own /pulsar/lib, read under /proc/PID/root
    image_root = tmp_path / "root"
    (image_root / "pulsar" / "lib").mkdir(parents=True)
    (image_root / "pulsar" / "lib" / "org.apache.pulsar-pulsar-broker-4.0.6.jar").touch()
    inside = ["java", "-cp", "/pulsar/conf:::/pulsar/lib/*:", "org.apache.bookkeeper.server.Main"]
    assert versions.from_command_line(inside, root=image_root).version == "4.0.6"
    assert versions.from_command_line(inside).version is None  # not this machine's /pulsar


def test_upgrade_to_something_that_is_no_release_is_a_usage_error_before_anything(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pulsarlab.cli import app

    r = CliRunner().invoke(app, ["upgrade", "--to", "4.0;rm", "--state-dir", str(tmp_path / "none")])
    assert r.exit_code == 2, r.output
    assert "'4.0;rm' is not a Pulsar release" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "none").exists()
