"""The playbooks on rehearsal hosts (``pulsarlab hosts up``: one container per node, each in its own
network namespace with its own address, reached over SSH): ``deploy.yml`` and ``configure.yml``
put ``sync`` without eu's second broker (Pulsar 4.0.6) onto eight of nine hosts; placement is
proven and messages go through
pulsarlab; a dynamic broker key given in the topology reaches every broker through the admin
API with no restart; a second deploy restarts only the node whose file changed and changes nothing else;
add-bookie brings in the tenth host. One recorded workload runs from the rolling-restart and
replace-bookie runbooks through the region failover drill to the upgrade (every node onto 4.0.8,
one at a time) and the rollback (every node back onto 4.0.6), and the verifier judges its whole
history last. One deployment for the module (helpers in ansible_deployed.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from pulsarlab import ops
from pulsarlab.chaos import targets
from pulsarlab.distribution import DEFAULT_VERSION
from pulsarlab.topology import BUILTIN_DIR, Role, load
from tests.cluster.ansible_deployed import (
    Deployed,
    Recorded,
    every_node_serving,
    finish_workload,
    installed,
    node_log_tail,
    running_workload,
)
from tests.cluster.ansible_hosts import LabHosts, Play, docker
from tests.cluster.test_sync import _drain, _produce, assert_placed_in_both_regions
from tests.scenario_files import builtin, scaled_builtin

pytestmark = pytest.mark.cluster
# eu's second broker is left out: every playbook still meets each role in each region, and the lab
# runs a JVM fewer through the hour its tests take (each upgrade, rollback and rolling restart a node
# shorter), on a machine whose two cores the other tests share. us keeps both: the workload's topic
# (mytenant/us) stays on a us broker through the rolling restart (a topic whose only primary broker
# restarts moves to a secondary one in the other region and stays there)
LEFT_OUT = frozenset({"pulsar2-eu"})
SYSTEMD = frozenset({"bk2-us", "pulsar2-us"})  # hosts with systemd: their nodes run as units
BARE = frozenset({"zk"})  # a host without Java: deploy.yml installs Debian's
SENT = frozenset({"zk"})  # the controller sends it the distribution over SSH; the others download it from the lab's mirror
WAIT_REPLICATED = Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "pulsar_node" / "files" / "wait_replicated.py"
OLD, NEW = "4.0.6", DEFAULT_VERSION  # deploy.yml installs the older release; the upgrade test moves to the newer
NEW_BOOKIE = {"name": "bk3-eu", "role": "bookie", "cluster": "mycluster", "region": "eu", "rack": "eu/1"}


def lab_topology() -> dict:
    """Built-in ``sync`` without the nodes of LEFT_OUT (and without them in its isolation policies)."""
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    data["nodes"] = [n for n in data["nodes"] if n["name"] not in LEFT_OUT]
    for cluster in data["clusters"]:
        for policy in cluster.get("isolation", []):
            policy["primary"] = [b for b in policy["primary"] if b not in LEFT_OUT]
    return data


@pytest.fixture(scope="module")
def deployed(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    root = tmp_path_factory.mktemp("ansible")
    data = lab_topology()
    wanted = root / "sync-bk3.yaml"  # appended last: every other node keeps its host's address
    wanted.write_text(yaml.safe_dump({**data, "pulsar_version": OLD, "nodes": [*data["nodes"], NEW_BOOKIE]}))
    lab = root / "lab"
    hosts = LabHosts(wanted, lab, docker_host, SYSTEMD, BARE, SENT)
    try:
        hosts.start()
        big_ref = root / "sync-bk3-at-hosts.yaml"  # the lab's topology (the hosts' addresses), for add-bookie
        big_ref.write_text((lab / "topology.yaml").read_text())
        small = yaml.safe_load(big_ref.read_text())
        small_ref = root / "sync-at-hosts.yaml"
        small_ref.write_text(yaml.safe_dump({**small, "nodes": [n for n in small["nodes"] if n["name"] != NEW_BOOKIE["name"]]}))
        ops.render_topology(str(small_ref), lab, runtime="ansible")  # what the operator deploys first: eight nodes
        play = hosts.playbook(lab / "inventory.yml", "deploy.yml")
        assert play.rc == 0, play.report(6000)
        print(f"deploy.yml: sync on {len(small['nodes']) - 1} rehearsal hosts in {play.seconds:.1f}s")
        yield Deployed(hosts, load(str(small_ref), loopback=False), str(big_ref), lab, root / "state", play)
    finally:
        hosts.remove()


@pytest.fixture(scope="module")
def configured(deployed: Deployed) -> Deployed:
    play = deployed.hosts.playbook(deployed.inventory, "configure.yml", "-e", f"pulsarlab_state_dir={deployed.state_dir}")
    assert play.rc == 0, play.report(6000)
    assert play.recap()["localhost"]["changed"] == 1  # a fresh cluster: tenants, namespaces, policies applied
    print(f"configure.yml in {play.seconds:.1f}s")
    return deployed


def test_the_first_deploy_started_every_node_in_order(deployed: Deployed) -> None:
    recap = deployed.deploy.recap()
    assert set(recap) == {n.name for n in deployed.small.nodes}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 and r["changed"] > 0 for r in recap.values())
    out = deployed.deploy.output
    for node in BARE:  # Java came from Debian's package, installed by the play
        assert "openjdk-17-jre-headless" in installed(deployed, node).split()
    # the distribution: sent over SSH to the hosts of SENT, downloaded from the lab's Maven mirror by the others
    sent = task_hosts(out, "Send the distribution from the controller's artifact cache")
    fetched = task_hosts(out, "Download the distribution from the Maven mirror, checked against its SHA-1")
    assert (sent, fetched) == (set(SENT), set(recap) - SENT), (sent, fetched)
    for node in SYSTEMD:
        unit = docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node), "systemctl", "is-active", f"pulsar-{node}")
        assert unit.stdout.strip() == "active", (node, unit.stdout, unit.stderr)
    # the lab has no DNS server: a lookup of an address outside /etc/hosts (the controller's side of
    # the bridge, where pulsarlab's clients connect from) fails at once, not after a resolver's timeout
    t0 = time.monotonic()
    looked = docker(deployed.hosts.docker_host, "exec", deployed.hosts.name("bk1-eu"), "getent", "hosts",
                    deployed.hosts.lab["controller"])
    assert looked.returncode != 0 and time.monotonic() - t0 < 3, (looked, time.monotonic() - t0)
    order = [out.index(f"PLAY [{what}]") for what in (
        "Start ZooKeeper", "Initialise the cluster metadata and write the rack map", "Start the first bookie of each cluster",
        "Start the bookies", "Start the brokers")]
    assert order == sorted(order)


def test_placement_puts_a_copy_in_each_region_and_messages_go_through(configured: Deployed) -> None:
    cluster = configured.cluster()
    assert ops.configure(configured.state_dir, dry_run=True).changes == []
    topic = f"persistent://mytenant/eu/ansible-{uuid.uuid4().hex[:8]}"
    sent = [f"a-{i}".encode() for i in range(200)]
    _produce(cluster, sent, topic)
    assert_placed_in_both_regions(cluster, topic)
    assert set(sent) <= _drain(cluster, topic, set(sent))


def test_a_dynamic_broker_setting_of_the_topology_reaches_every_broker_without_a_restart(
        configured: Deployed, tmp_path: Path) -> None:
    """The operator's topology gives every broker a new value of a key Pulsar changes at run time
    (issue 31): rendered again, deploy.yml sets it through the admin API and restarts nothing, every
    broker runs the new value; the old topology back, the same way back."""
    key = "brokerDeleteInactiveTopicsEnabled"
    brokers = [n for n in configured.small.nodes if n.role == Role.BROKER]

    def running_values() -> dict[str, str]:
        return {b.name: requests.get(f"http://{configured.small.address_of(b)}:{b.port('web')}/admin/v2/brokers/configuration/runtime",
                                     timeout=10).json()[key] for b in brokers}

    def deployed_with(config: dict, *extra: str) -> Play:
        topo = tmp_path / "sync-at-hosts.yaml"
        topo.write_text(yaml.safe_dump({**configured.small.model_dump(mode="json", exclude_none=True), "config": config}))
        ops.render_topology(str(topo), configured.render_dir, runtime="ansible")
        return configured.play("deploy.yml", *extra)

    assert set(running_values().values()) == {"true"}
    pids = configured.pids()
    try:
        play = deployed_with({"broker": {key: False}})
        assert play.rc == 0, configured.failed(play)
        assert configured.pids() == pids  # nothing restarted
        assert set(running_values().values()) == {"false"}, running_values()
        assert task_hosts(play.output, "Set the keys through one broker of the cluster", role=False) == {brokers[0].name}
        assert task_hosts(play.output, "Clear its pending restart", role=False) == {
            b.name for b in brokers}
    finally:  # only the brokers' files differ: putting them back needs no other host's play
        back = deployed_with({}, "--limit", "brokers")
    assert back.rc == 0, configured.failed(back)
    assert configured.pids() == pids and set(running_values().values()) == {"true"}, running_values()


def test_a_second_deploy_changes_only_the_node_whose_file_changed_then_nothing(configured: Deployed) -> None:
    """The second deploy.yml over a running cluster, with a static key of one broker's file changed:
    only that broker is restarted, every other host reports no change (the idempotence of the whole play);
    the next run changes nothing on that host either, and a second configure.yml changes nothing.
    The upgrade test, later, restarts every node onto files written anew (this host's, too)."""
    conf = configured.render_dir / "host_files" / "pulsar2-us" / "conf" / "broker.conf"
    original = conf.read_text()
    pids = configured.pids()
    conf.write_text(original + "# changed by the test (a static key: only a restart applies it)\nnumIOThreads=3\n")
    try:
        play = configured.play("deploy.yml")
        assert play.rc == 0, play.report(6000)
        assert "PLAY [Restart the brokers whose files changed, one at a time]" in play.output
        changed = {h: r["changed"] for h, r in play.recap().items()}
        assert changed.pop("pulsar2-us") > 0
        assert changed == {n.name: 0 for n in configured.small.nodes if n.name != "pulsar2-us"}
        after = configured.pids()
        assert after["pulsar2-us"] and after["pulsar2-us"] != pids["pulsar2-us"]
        assert {n: p for n, p in after.items() if n != "pulsar2-us"} == {n: p for n, p in pids.items() if n != "pulsar2-us"}
        # the next run leaves it be (the others were just shown unchanged: only its host is visited)
        again = configured.play("deploy.yml", "--limit", "pulsar2-us")
        assert again.rc == 0 and {h: r["changed"] for h, r in again.recap().items()} == {"pulsar2-us": 0}, again.report(3000)
    finally:
        # the rendered file again; the host keeps the changed one (a harmless value) until the
        # upgrade writes every host's files and restarts each node anyway
        conf.write_text(original)
    conf_again = configured.play("configure.yml", "-e", f"pulsarlab_state_dir={configured.state_dir}")
    assert conf_again.rc == 0 and conf_again.recap()["localhost"]["changed"] == 0, conf_again.report(3000)


def task_hosts(output: str, task: str, role: bool = True) -> set[str]:
    """The hosts a task of a play's output changed (``role``: a task of the pulsar_node role)."""
    block = output.split(f"TASK [{'pulsar_node : ' if role else ''}{task}]", 1)[1].split("\nTASK [", 1)[0]
    return set(re.findall(r"^changed: \[([^\]]+)\]", block, re.M))


def rules_on_hosts(deployed: Deployed) -> dict[str, int]:
    """Per host, how many packet filter rules of pulsarlab's it has (hosts without any left out)."""
    counts = {}
    for node in deployed.small.nodes:
        listing = docker(deployed.hosts.docker_host, "exec", deployed.hosts.name(node.name), "iptables", "-S").stdout
        if n := listing.count("pulsarlab:"):
            counts[node.name] = n
    return counts


def pulsarlab_cli(deployed: Deployed, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI as a user runs it beside the playbooks (the hosts' engine in DOCKER_HOST)."""
    proc = subprocess.run([sys.executable, "-m", "pulsarlab.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_HOST": deployed.hosts.docker_host})
    print(f"pulsarlab {' '.join(args)}: exit {proc.returncode}")
    return proc


def test_a_scenario_and_node_commands_act_on_the_hosts(configured: Deployed, tmp_path: Path) -> None:
    """configure.yml attached the hosts with their inventory, so faults reach them (through
    playbooks/node.yml), over SSH: sync-region-loss (every eu bookie and broker killed on its host,
    the topic taken over in us; the built-in's kill without the broker the lab leaves out, and its
    producing shortened: the run goes on until the topic is acknowledged again anyway) and
    sync-partition (eu cut from us in each host's own packet filter, then healed) run --on its state
    folder, nothing acknowledged lost, the kill timed by the hosts' own clocks, every node started
    again and no rule left on any host (test_docker_sync.py runs kill-ensemble-bookie, whose choice
    of a bookie is the same on every runtime); a killed node of a systemd host stays
    down (the unit's Restart=on-failure does not bring it back) until 'node start'; a rule and a
    paused JVM that runs ended without undoing are undone by 'chaos heal'."""
    state = str(configured.state_dir)
    scenario = builtin("sync-region-loss")
    [step] = scenario["schedule"]
    eu = [n.name for n in configured.small.nodes if n.region == "eu" and n.role != Role.ZOOKEEPER]
    assert set(step["fault"].split()[1:]) - set(eu) == {"pulsar2-eu"}, step
    step["fault"] = f"kill {' '.join(eu)}"
    scenario["workload"]["duration"] = 30
    region_loss = scaled_builtin("sync-region-loss", tmp_path, scenario)  # the built-in's kill names the broker left out
    scenarios = ("sync-region-loss", "sync-partition")
    run = pulsarlab_cli(configured, "scenario", "run", str(region_loss), str(scaled_builtin("sync-partition", tmp_path)),
                        "--on", state, "--json", "--out", str(tmp_path / "runs"), timeout=900)
    verdicts = {v["scenario"]: v for v in json.loads(run.stdout)["runs"]}
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    for name in scenarios:
        v = verdicts[name]
        assert (v["status"], v["rpo"]) == ("pass", 0), v
        print(f"{name} on the hosts: max recovery {v['rto']['max_recovery_s']} s, longest without an ack "
              f"{max(p['longest_without_ack_s'] for p in v['rto']['producers'])} s, {v['seconds']} s of run")
    kill = verdicts["sync-region-loss"]["faults"][0]  # when the JVMs were killed, by their hosts' clocks
    assert kill["fault"].startswith("kill ") and kill["outcome"] == "ok", kill
    assert kill["effect_ts"] is not None and kill["ts"] <= kill["effect_ts"] <= kill["ended_ts"], kill
    p = verdicts["sync-partition"]
    assert [(f["fault"], f["outcome"]) for f in p["faults"]] == [("partition eu us", "ok"), ("heal", "ok")], p["faults"]
    assert rules_on_hosts(configured) == {}
    pids = configured.pids()  # each run's end started again what its faults stopped (bk3-eu: not deployed yet)
    assert all(pid for name, pid in pids.items() if name != NEW_BOOKIE["name"]), pids

    unit = ["exec", configured.hosts.name("pulsar2-us"), "systemctl", "is-active", "pulsar-pulsar2-us"]
    assert pulsarlab_cli(configured, "node", "kill", "pulsar2-us", "--state-dir", state).returncode == 0
    assert not configured.pids()["pulsar2-us"]
    time.sleep(2)  # systemd would restart a failed unit after RestartSec (100 ms)
    assert docker(configured.hosts.docker_host, *unit).stdout.strip() in ("inactive", "failed")
    assert not configured.pids()["pulsar2-us"]
    started = pulsarlab_cli(configured, "node", "start", "pulsar2-us", "--state-dir", state)
    assert started.returncode == 0, started.stderr[-3000:]
    assert docker(configured.hosts.docker_host, *unit).stdout.strip() == "active"

    # a cut and a pause left behind by pulsarlab runs that ended without undoing them (as a crash
    # would): 'chaos heal' finds the rules on the hosts and removes them, and resumes the JVM. Both
    # fall on brokers, which keep serving when their metadata session expires meanwhile (the
    # brokers' rendered session timeout is 10 s, and on a loaded machine the CLI calls between the
    # cut and the heal take longer); a bookie whose session expires shuts itself down, as Pulsar's do
    pid = configured.pids()["pulsar2-us"]
    stat = ["exec", configured.hosts.name("pulsar2-us"), "ps", "-o", "stat=", "-p", pid]
    cut = pulsarlab_cli(configured, "chaos", "isolate-zk", "pulsar1-eu", "--state-dir", state)
    assert cut.returncode == 0, cut.stderr[-3000:]
    assert pulsarlab_cli(configured, "node", "pause", "pulsar2-us", "--state-dir", state).returncode == 0
    assert rules_on_hosts(configured) == {"pulsar1-eu": 2, "zk": 2}
    assert docker(configured.hosts.docker_host, *stat).stdout.strip().startswith("T")
    healed = pulsarlab_cli(configured, "chaos", "heal", "--state-dir", state)
    assert healed.returncode == 0, healed.stderr[-3000:]
    assert "removed 4 DROP rule(s)" in healed.stdout and "resumed pulsar2-us" in healed.stdout, healed.stdout
    assert rules_on_hosts(configured) == {}
    assert not docker(configured.hosts.docker_host, *stat).stdout.strip().startswith("T")
    try:
        every_node_serving(state, {**os.environ, "DOCKER_HOST": configured.hosts.docker_host})
    except AssertionError as exc:
        pytest.fail(f"{exc}\n" + "\n".join(f"--- {n.name} ---\n{node_log_tail(configured, n.name)}"
                                             for n in configured.small.nodes))


@pytest.fixture(scope="module")
def recorded(configured: Deployed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """One recorded workload (deduplication on) from the first runbook to the upgrade, on a topic of
    mytenant/us (the drill moves its owner to eu and back): each test adds its plays' window, and
    the module's last test ends it and has the verifier judge the whole history."""
    topic = f"persistent://mytenant/us/runbooks-{uuid.uuid4().hex[:8]}"
    run = tmp_path_factory.mktemp("workload") / "run"
    # 20 a second: the shortest play's window (a rolling restart, about a minute) still holds a
    # thousand sends. Every send is journaled with an fsync on two of the hosts' bookies for the hour
    # the module takes on a slow machine, beside the other workers' clusters: at 50 a second the lab's
    # bookies used 12-28 % of a core each in such a run (load average 54)
    with running_workload(configured, topic, run, rate=20, duration=3600) as workload:
        yield Recorded(workload, topic, run, {})


def test_runbooks_under_a_workload_keep_a_copy_in_each_region(configured: Deployed, recorded: Recorded) -> None:
    """rolling-restart.yml, then replace-bookie.yml for the eu bookie in the topic's ensemble, whose
    machine is lost (a new, empty one in its place), while the workload records every send, ack
    and delivery (judged by the last test)."""
    cluster = configured.cluster()
    with recorded.window("rolling-restart.yml"):
        play = configured.play("rolling-restart.yml")
    assert play.rc == 0, configured.failed(play)
    brokers = [n.name for n in cluster.topo.nodes_of(Role.BROKER)]
    assert {h: r["changed"] > 0 for h, r in play.recap().items()} == dict.fromkeys(brokers, True)

    [victim] = [n for n in targets.ensemble(cluster, recorded.topic) if cluster.topo.node(n).region == "eu"]
    with recorded.window(f"replace-bookie.yml ({victim})"):
        configured.hosts.replace(victim)
        play = configured.play("replace-bookie.yml", "-e", f"pulsar_replace_bookie={victim}")
    assert play.rc == 0, configured.failed(play)
    assert play.recap()[victim]["changed"] > 0
    new_home = configured.homes()[victim]  # a new machine: the play put the distribution on it
    assert new_home and new_home == yaml.safe_load((configured.render_dir / "group_vars" / "all.yml").read_text())["pulsar_home"]

    # the lost bookie's copies were made again: still one per region, and a second run leaves it be
    assert_placed_in_both_regions(cluster, recorded.topic, home="us")
    again = configured.play("replace-bookie.yml", "-e", f"pulsar_replace_bookie={victim}")
    assert again.rc == 0 and not any(r["changed"] for r in again.recap().values()), again.report(3000)


def test_add_bookie_registers_it_writable_in_its_rack_and_restarts_nothing_else(configured: Deployed) -> None:
    before = configured.pids()
    assert before["bk3-eu"] == "" and all(pid for name, pid in before.items() if name != "bk3-eu")
    ops.render_topology(configured.big_ref, configured.render_dir, runtime="ansible")  # the operator's re-render
    play = configured.play("add-bookie.yml", "-e", "pulsar_new_bookie=bk3-eu")
    assert play.rc == 0, play.report(6000)
    recap = play.recap()
    assert set(recap) == {"localhost", "zk", "bk3-eu"}, recap  # nothing else is even visited
    assert recap["bk3-eu"]["changed"] > 0 and recap["zk"]["changed"] == 1  # the rack map written once
    out = play.output
    assert out.index("PLAY [Write the rack map with the new bookie in it]") < out.index(
        "PLAY [Start the new bookie and check the cluster lists it writable]")

    after = configured.pids()
    assert after["bk3-eu"], "the new bookie does not run"
    assert {n: p for n, p in after.items() if n != "bk3-eu"} == {n: p for n, p in before.items() if n != "bk3-eu"}
    writable = requests.get(f"{configured.url('bk2-us', 'http')}/api/v1/bookie/list_bookies",
                            params={"type": "rw", "print_hostnames": "false"}, timeout=10).json()
    assert configured.bookie_id("bk3-eu") in writable, writable
    racks = requests.get(f"{configured.url('pulsar1-us', 'web')}/admin/v2/bookies/racks-info", timeout=10).json()
    placed = {bid: info["rack"] for group in racks.values() for bid, info in group.items()}
    assert placed.get(configured.bookie_id("bk3-eu")) == "eu/1", racks

    # pulsarlab attaches again to the re-rendered topology: inspect, workload and chaos know bk3-eu
    conf = configured.play("configure.yml", "-e", f"pulsarlab_state_dir={configured.state_dir}")
    assert conf.rc == 0, conf.report(3000)
    assert configured.cluster().topo.node("bk3-eu").rack == "eu/1"

    again = configured.play("add-bookie.yml", "-e", "pulsar_new_bookie=bk3-eu")
    assert again.rc == 0, again.report(6000)
    assert {h: r["changed"] for h, r in again.recap().items()} == {"localhost": 0, "zk": 0, "bk3-eu": 0}
    assert configured.pids() == after


def test_add_bookie_refuses_a_name_not_in_the_inventory(configured: Deployed) -> None:
    play = configured.play("add-bookie.yml", "-e", "pulsar_new_bookie=bk9-eu")
    assert play.rc != 0
    assert "pulsar_new_bookie must name bookies of the inventory" in play.output
    assert set(play.recap()) == {"localhost"}


def test_region_failover_refuses_to_stop_the_zookeeper_region(configured: Deployed) -> None:
    before = configured.pids()
    play = configured.play("region-failover.yml", "-e", "pulsar_failover_region=eu", "-e", "pulsar_failover_confirm=false")
    assert play.rc != 0
    assert "region eu holds ZooKeeper zk: stopping it leaves 0 of 1 ZooKeeper nodes, no quorum" in " ".join(play.output.split())
    assert set(play.recap()) == {"localhost"}
    assert configured.pids() == before


def test_region_failover_drill_of_us_moves_the_owner_and_back(configured: Deployed, recorded: Recorded) -> None:
    """The drill of us under the workload (its topic's owner moves to eu and back): only us nodes
    restart, lookups answer from eu meanwhile, and no ledger that holds entries is left
    under-replicated. Deduplication is on: a send resent when its broker stops must not be stored
    twice (without it, one was)."""
    before = configured.pids()
    with recorded.window("region-failover.yml (us)"):
        play = configured.play("region-failover.yml", "-e", "pulsar_failover_region=us", "-e", "pulsar_failover_confirm=false",
                               "-e", "pulsar_failover_hold_seconds=10")
    assert play.rc == 0, configured.failed(play)
    recap = play.recap()
    us = {"bk1-us", "bk2-us", "pulsar1-us", "pulsar2-us"}
    assert us <= set(recap) and not [h for h, r in recap.items() if h not in us and r["changed"]], recap  # eu only read
    after = configured.pids()
    assert all(after[n] and after[n] != before[n] for n in us), (before, after)  # stopped, then running again
    assert {n: after[n] for n in after if n not in us} == {n: before[n] for n in before if n not in us}
    # the lookups answered from eu brokers (the play checks it; here: they ran for both namespaces)
    assert "mytenant/us (cluster mycluster" in play.output and "mytenant/eu (cluster mycluster" in play.output
    writable = requests.get(f"{configured.url('bk2-eu', 'http')}/api/v1/bookie/list_bookies",
                            params={"type": "rw", "print_hostnames": "false"}, timeout=10).json()
    assert {configured.bookie_id(b) for b in ("bk1-us", "bk2-us")} <= set(writable)
    # the play's own rule, asked again here: no ledger that holds entries is under-replicated
    check = subprocess.run([sys.executable, str(WAIT_REPLICATED), configured.url("bk2-eu", "http"), "0"],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout
    print(check.stdout.strip())


def test_upgrade_under_a_workload_moves_every_node_one_at_a_time(configured: Deployed, recorded: Recorded,
                                                                 tmp_path: Path) -> None:
    """From Pulsar 4.0.6 (what deploy.yml installed) to 4.0.8, the operator's way: the topology
    re-rendered with the new release, then upgrade.yml while the workload runs: every JVM moves to
    the new distribution, restarted once, ZooKeeper first, then the bookies, then the brokers, and
    each broker reports the new release itself; a second run restarts nothing (an interrupted
    upgrade resumes where it stopped)."""
    old_home = yaml.safe_load((configured.render_dir / "group_vars" / "all.yml").read_text())["pulsar_home"]
    assert old_home.endswith(OLD) and set(configured.homes().values()) == {old_home}
    newer = tmp_path / "sync-bk3-at-hosts-new.yaml"
    newer.write_text(yaml.safe_dump({**yaml.safe_load(Path(configured.big_ref).read_text()), "pulsar_version": NEW}))
    ops.render_topology(str(newer), configured.render_dir, runtime="ansible")
    new_home = yaml.safe_load((configured.render_dir / "group_vars" / "all.yml").read_text())["pulsar_home"]
    before = configured.pids()

    with recorded.window(f"upgrade.yml ({OLD} to {NEW})"):
        play = configured.play("upgrade.yml")
    assert play.rc == 0, configured.failed(play)
    out = play.output
    order = [out.index(f"PLAY [{what}]") for what in (
        "Unpack the new distribution and write every node's files for it, on every host (no restart)",
        "Upgrade ZooKeeper, one node at a time",
        "Upgrade the bookies, one at a time, each followed by no under-replicated ledger",
        "Upgrade the brokers, one at a time")]
    assert order == sorted(order)
    upgraded = configured.pids()
    assert all(upgraded[n] and upgraded[n] != before[n] for n in before), (before, upgraded)
    assert configured.homes() == dict.fromkeys(before, new_home) and new_home.endswith(NEW)
    brokers = [n.name for n in configured.hosts.topo.nodes if n.role == Role.BROKER]
    said = {b: requests.get(f"{configured.url(b, 'web')}/admin/v2/brokers/version", timeout=10).text.strip('"') for b in brokers}
    assert said == dict.fromkeys(brokers, NEW), said

    again = configured.play("upgrade.yml")  # everything on the version: nothing restarts
    assert again.rc == 0, again.report(6000)
    assert {h: r["changed"] for h, r in again.recap().items()} == {n.name: 0 for n in configured.hosts.topo.nodes}
    assert configured.pids() == upgraded


def test_rollback_under_the_workload_moves_every_node_back_one_at_a_time(configured: Deployed, recorded: Recorded,
                                                                       tmp_path: Path) -> None:
    """Back from 4.0.8 to 4.0.6 the same way (a rollback is an upgrade to an older release): the
    topology re-rendered with the old release, upgrade.yml under the same workload; every JVM
    restarted once from the old distribution (still unpacked beside the new one), each broker
    reporting 4.0.6 itself."""
    older = tmp_path / "sync-bk3-at-hosts-old.yaml"
    older.write_text(yaml.safe_dump({**yaml.safe_load(Path(configured.big_ref).read_text()), "pulsar_version": OLD}))
    ops.render_topology(str(older), configured.render_dir, runtime="ansible")
    old_home = yaml.safe_load((configured.render_dir / "group_vars" / "all.yml").read_text())["pulsar_home"]
    before = configured.pids()
    assert old_home.endswith(OLD) and set(configured.homes().values()) != {old_home}

    with recorded.window(f"upgrade.yml ({NEW} back to {OLD})"):
        play = configured.play("upgrade.yml")
    assert play.rc == 0, configured.failed(play)
    after = configured.pids()
    assert all(after[n] and after[n] != before[n] for n in before), (before, after)
    assert configured.homes() == dict.fromkeys(before, old_home)
    brokers = [n.name for n in configured.hosts.topo.nodes if n.role == Role.BROKER]
    said = {b: requests.get(f"{configured.url(b, 'web')}/admin/v2/brokers/version", timeout=10).text.strip('"') for b in brokers}
    assert said == dict.fromkeys(brokers, OLD), said


def test_the_workload_under_every_runbook_lost_nothing(recorded: Recorded, tmp_path: Path) -> None:
    """Last in the module: the workload that ran through the runbooks, the drill and the upgrade
    ends (a Ctrl-C, consumers drain, storage read back) and ``pulsarlab verify`` judges the whole
    history: nothing acknowledged lost or stored twice; each play's longest time without an ack."""
    assert recorded.windows, "no runbook ran under the workload"
    finish_workload(recorded.workload, recorded.run, recorded.windows, tmp_path)
