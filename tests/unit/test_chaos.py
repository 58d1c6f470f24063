"""Fault targets, argument checks and the iptables rule set, without a cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab.chaos import netfilter, targets
from pulsarlab.chaos.actions import ACTIONS, Fault, check
from pulsarlab.chaos.netfilter import Rule
from pulsarlab.cli import app
from pulsarlab.errors import StateError
from pulsarlab.identity import state_digest
from pulsarlab.runtime import new_deployment
from pulsarlab.topology import Role, load

runner = CliRunner()
TOPIC = "persistent://mytenant/eu/t1"


@pytest.fixture(scope="module")
def sync(tmp_path_factory):
    return new_deployment(load("sync"), tmp_path_factory.mktemp("state"))


def test_every_fault_is_registered_by_importing_the_schedule() -> None:
    assert {"kill", "stop", "start", "pause", "resume", "region-loss", "partition", "heal", "isolate-zk",
            "power-loss", "disk-loss", "await-replicated", "unload"} <= set(ACTIONS)


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("bk1-eu", "node", "bk1-eu"),
    (f"owner:{TOPIC}", "owner", TOPIC),
    (f"ensemble:{TOPIC}", "ensemble", TOPIC),
    ("region:us", "region", "us"),
    ("down:bookie", "down", "bookie"),
])
def test_targets_parse(text: str, kind: str, value: str) -> None:
    t = targets.parse(text)
    assert (t.kind, t.value) == (kind, value)
    assert str(t) == text


@pytest.mark.parametrize(("text", "says"), [
    ("", "empty target"),
    ("leader:x", "unknown target kind 'leader'"),
    ("owner:", "names no topic"),
    ("region:", "names no region"),
    ("down:", "names no role"),
    ("down:bookies", "down: names a role"),
    ("owner:mytenant/eu/t1", "not a full topic name"),
    ("ensemble:http://mytenant/eu/t1", "not a full topic name"),
])
def test_bad_target_syntax_is_named(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        targets.parse(text)


def test_targets_are_checked_against_the_topology(sync) -> None:
    topo = sync.topo
    targets.check_all(topo, ["bk1-eu", f"owner:{TOPIC}", "region:us"])
    with pytest.raises(ValueError, match="no node 'bk9'.*nodes: zk, bk1-eu"):
        targets.check_all(topo, ["bk9"])
    with pytest.raises(ValueError, match="no region 'asia'.*regions: eu, us"):
        targets.check_all(topo, ["region:asia"])
    geo = load("geo")
    with pytest.raises(ValueError, match="not in a namespace of topology 'geo'.*several.*world/global"):
        targets.check_all(geo, ["owner:persistent://other/ns/t"])
    with pytest.raises(ValueError, match="pulsar1-eu is a broker, not a bookie"):
        targets.check_all(topo, ["pulsar1-eu"], Role.BOOKIE)
    with pytest.raises(ValueError, match="names a broker, not a bookie"):
        targets.check_all(topo, [f"owner:{TOPIC}"], Role.BOOKIE)
    with pytest.raises(ValueError, match="down:broker names a broker, not a bookie"):
        targets.check_all(topo, ["down:broker"], Role.BOOKIE)
    with pytest.raises(ValueError, match="at least one"):
        targets.check_all(topo, [])


@pytest.mark.parametrize(("fault", "says"), [
    (Fault(0, "region-loss", ("asia",)), "no region 'asia'"),
    (Fault(0, "region-loss", ()), "exactly one region"),
    (Fault(0, "partition", ("eu",)), "two regions"),
    (Fault(0, "partition", ("eu", "eu")), "two different regions"),
    (Fault(0, "partition", ("eu", "mars")), "no region 'mars'"),
    (Fault(0, "heal", ("eu",)), "takes no arguments"),
    (Fault(0, "power-loss", ("now",)), "takes no arguments"),
    (Fault(0, "disk-loss", ("pulsar1-eu",)), "pulsar1-eu is a broker, not a bookie"),
    (Fault(0, "isolate-zk", ("zk",)), "zk is a ZooKeeper node itself"),
    (Fault(0, "isolate-zk", ("region:eu",)), "not a region"),
    (Fault(0, "kill", ("owner:bad",)), "not a full topic name"),
    (Fault(0, "await-replicated", (TOPIC, "-3")), "positive number"),
    (Fault(0, "unload", ()), "exactly one topic"),
    (Fault(0, "unload", ("orders",)), "not a full topic name"),
    (Fault(0, "explode", ()), "unknown fault action 'explode'"),
])
def test_fault_arguments_are_checked_before_anything_runs(sync, fault: Fault, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        check(sync, fault)


def test_cuts_match_each_nodes_own_cgroup_and_the_other_nodes_address(sync, monkeypatch) -> None:
    from pulsarlab.chaos.network import addresses, isolate_rules, partition_rules
    from pulsarlab.chaos.outages import cookie_path, region_nodes
    from pulsarlab.runtime import cgroup

    monkeypatch.setattr(cgroup, "usable", lambda: Path("/sys/fs/cgroup"))  # as root: each node in its own
    assert region_nodes(sync, "us") == ["bk1-us", "bk2-us", "pulsar1-us", "pulsar2-us"]
    assert addresses(sync, region_nodes(sync, "us")) == ["127.0.2.1", "127.0.2.2", "127.0.2.3", "127.0.2.4"]
    group = f"pulsarlab/{state_digest(sync.state_dir)}"
    rules = partition_rules(sync, "eu", "us")
    assert len(rules) == 5 * 4 * 2  # zk + 4 eu nodes, 4 us nodes, both ways
    # what zk sends to bk1-us, and what bk1-us sends to zk: the sender told apart by its cgroup
    assert Rule(f"{group}/zk", "127.0.2.1", rules[0].comment) in rules
    assert Rule(f"{group}/bk1-us", "127.0.1.1", rules[0].comment) in rules
    assert rules[0].comment == f"{netfilter.identity(sync.state_dir)} partition eu us"
    iso = isolate_rules(sync, "pulsar1-us")
    assert {(r.cgroup, r.dest) for r in iso} == {(f"{group}/pulsar1-us", "127.0.1.1"), (f"{group}/zk", "127.0.2.3")}
    assert cookie_path(sync, "bk1-us") == "/ledgers/cookies/127.0.2.1:3181"


def test_a_node_whose_traffic_cannot_be_told_apart_is_refused_by_name(sync, monkeypatch) -> None:
    from pulsarlab.chaos.network import isolate_rules

    monkeypatch.setattr(type(sync), "traffic_cgroup", lambda self, name: "" if name == "zk" else f"g/{name}")
    with pytest.raises(StateError, match="cannot cut zk off: .*root cgroup"):
        isolate_rules(sync, "pulsar1-us")
    monkeypatch.setattr(type(sync), "traffic_cgroup", lambda self, name: "shared" if name != "zk" else "g/zk")
    with pytest.raises(StateError, match="cannot cut pulsar1-us off: .*shares its cgroup with bk1-eu"):
        isolate_rules(sync, "pulsar1-us")


def test_rule_rendering_is_exact() -> None:
    ident = netfilter.identity(Path("/tmp/some-state"))
    assert ident.startswith("pulsarlab:") and len(ident) == len("pulsarlab:") + 12
    assert ident == netfilter.identity(Path("/tmp/../tmp/some-state"))  # one identity per resolved state dir
    assert ident != netfilter.identity(Path("/tmp/other-state"))
    a, b, c = (netfilter.Member(f"g/{n}", f"10.0.0.{n}") for n in (1, 2, 3))
    rules = netfilter.cut(ident, "partition a b", [a, b], [b, c])
    pairs = {(r.cgroup, r.dest) for r in rules}
    assert pairs == {("g/1", "10.0.0.2"), ("g/2", "10.0.0.1"), ("g/1", "10.0.0.3"),
                     ("g/3", "10.0.0.1"), ("g/2", "10.0.0.3"), ("g/3", "10.0.0.2")}
    assert rules[0].spec() == ["-d", "10.0.0.2/32", "-m", "cgroup", "--path", "g/1", "-m", "comment", "--comment",
                               f"{ident} partition a b", "-j", "DROP"]
    with pytest.raises(ValueError, match="unusable rule label"):
        netfilter.comment(ident, 'x"; rm -rf')


def test_only_this_deployments_drop_rules_are_read_back_from_a_listing() -> None:
    ours, theirs = netfilter.identity(Path("/a")), netfilter.identity(Path("/b"))
    listing = "\n".join([
        "-P OUTPUT ACCEPT",
        f'-A OUTPUT -d 127.0.2.1/32 -m cgroup --path p/x/zk -m comment --comment "{ours} partition eu us" -j DROP',
        f'-A OUTPUT -d 127.0.1.1/32 -m cgroup --path p/y/zk -m comment --comment "{theirs} partition eu us" -j DROP',
        '-A OUTPUT -d 127.0.1.1/32 -m cgroup --path p/z -m comment --comment "someone else" -j DROP',
        "-A OUTPUT -d 10.0.0.0/8 -j ACCEPT",
        f'-A OUTPUT -d 127.0.2.1/32 -m cgroup --path p/x/zk -m comment --comment "{ours} x" -j ACCEPT',
    ])
    assert netfilter.parse_listing(listing, ours) == [Rule("p/x/zk", "127.0.2.1", f"{ours} partition eu us")]
    assert len(netfilter.parse_listing(listing)) == 2
    # a rule rendered by cut() is listed back as the same Rule (that is how add() skips existing ones)
    r = netfilter.cut(ours, "isolate-zk bk1", [netfilter.Member("p/x/bk1", "127.0.1.2")],
                      [netfilter.Member("p/x/zk", "127.0.1.1")])[0]
    line = "-A OUTPUT " + " ".join(f'"{w}"' if " " in w else w for w in r.spec())
    assert netfilter.parse_listing(line, ours) == [r]


def test_without_root_network_faults_say_so(monkeypatch) -> None:
    monkeypatch.setattr(netfilter.os, "geteuid", lambda: 1000)
    ipt = netfilter.Iptables()
    assert "need root" in (ipt.usable() or "")
    assert netfilter.remove_if_any(Path("/tmp/x")) == 0  # down: nothing could have been added
    monkeypatch.setattr(netfilter.shutil, "which", lambda _b: None)
    assert "not installed" in (ipt.usable() or "")


def test_chaos_cli_names_bad_arguments(tmp_path: Path) -> None:
    runner.invoke(app, ["render", "--topology", "sync", "--out", str(tmp_path)])
    (tmp_path / "state.json").write_text(json.dumps({"name": "sync", "runtime": "local", "topology_ref": "sync"}))
    for args, says in [
        (["chaos", "region-loss", "asia"], "no region 'asia'"),
        (["chaos", "partition", "eu", "eu"], "two different regions"),
        (["chaos", "disk-loss", "pulsar1-eu"], "not a bookie"),
        (["node", "kill", "owner:nonsense"], "not a full topic name"),
        (["node", "kill", "region:asia"], "no region 'asia'"),
    ]:
        result = runner.invoke(app, [*args, "--state-dir", str(tmp_path)])
        assert result.exit_code == 1, (args, result.output)
        assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    usage = runner.invoke(app, ["chaos", "partition", "eu", "--state-dir", str(tmp_path)])
    assert usage.exit_code == 2


def test_a_copy_on_a_bookie_known_down_is_a_gap_even_while_still_registered() -> None:
    from pulsarlab.admin.placement import LedgerPlacement, PlacementReport, TopicPlacement
    from pulsarlab.chaos.recovery import gaps

    led = LedgerPlacement(7, 10, {0: ["127.0.1.2:3181", "127.0.2.1:3181"]}, ["eu", "us"], [], False, False)
    report = PlacementReport([TopicPlacement(TOPIC, "mycluster", "b", "eu", "eu", [led])], {})
    assert gaps(report) == []
    assert gaps(report, {"127.0.1.2:3181"}) == [f"{TOPIC} ledger 7: a copy on a lost bookie (127.0.1.2:3181)"]
    led.missing_regions = ["eu"]
    assert gaps(report) == [f"{TOPIC} ledger 7: no copy in eu"]


def test_waiting_for_re_replication_names_a_topic_that_stays_deleted(sync, monkeypatch) -> None:
    """A topic the broker deleted (no durable subscription, idle) answers 404 for good: the wait says
    so soon instead of waiting out its timeout on 'placement not readable'; a brief 404 while the
    topic loads again is waited through."""
    from pulsarlab.admin.client import AdminError
    from pulsarlab.admin.placement import PlacementReport
    from pulsarlab.chaos import recovery

    def gone(cluster, topic):
        raise AdminError("GET", "http://127.0.1.4:8080/admin/v2/x/internalStats", 404, "Topic not found")

    monkeypatch.setattr(recovery, "GONE_AFTER_S", 0.05)
    monkeypatch.setattr(recovery.placement, "inspect", gone)
    with pytest.raises(StateError, match="does not exist any more .* subscribe before producing"):
        recovery.wait_replicated(sync, TOPIC, timeout=30, interval=0.01)

    answers = iter([gone, gone, lambda cluster, topic: PlacementReport([], {})])
    monkeypatch.setattr(recovery.placement, "inspect", lambda cluster, topic: next(answers)(cluster, topic))
    monkeypatch.setattr(recovery, "GONE_AFTER_S", 30.0)
    assert recovery.wait_replicated(sync, TOPIC, timeout=30, interval=0.01) == PlacementReport([], {})


def test_down_stands_for_the_nodes_of_a_role_not_running_now(sync, monkeypatch) -> None:
    monkeypatch.setattr(sync, "alive", lambda name: name != "bk2-us")
    assert targets.resolve_all(sync, ["down:bookie"]) == ["bk2-us"]
    with pytest.raises(StateError, match="down:broker: every broker is running"):
        targets.resolve_all(sync, ["down:broker"])


def test_mute_drops_only_what_the_node_sends_to_clients(sync, monkeypatch) -> None:
    from pulsarlab.chaos.network import CLIENT_ADDRESS, mute_rules
    from pulsarlab.runtime import cgroup

    monkeypatch.setattr(cgroup, "usable", lambda: Path("/sys/fs/cgroup"))
    [rule] = mute_rules(sync, "pulsar1-eu")
    assert (rule.cgroup, rule.dest) == (f"pulsarlab/{state_digest(sync.state_dir)}/pulsar1-eu", CLIENT_ADDRESS)
    assert rule.comment.endswith(" mute pulsar1-eu")


def test_disconnect_takes_a_broker_only(sync) -> None:
    from pulsarlab.chaos.network import disconnect

    with pytest.raises(StateError, match="bk1-eu is not a broker"):
        disconnect(sync, ("bk1-eu",))
