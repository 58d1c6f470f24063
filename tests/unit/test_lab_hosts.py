"""The rehearsal lab's pure parts: its network and addresses, the topology at the hosts'
addresses, each host's kind and SSH connection; and the rules a network fault adds on hosts."""

from __future__ import annotations

from ipaddress import IPv4Network

import pytest

from pulsarlab.chaos import netfilter
from pulsarlab.errors import UsageError
from pulsarlab.lab.hosts import Lab, addresses, at_addresses, connection, free_subnet, kinds_of, mirror_address, reuse_problem, up
from pulsarlab.topology import load


def test_the_lab_network_is_the_first_free_24_of_its_pool() -> None:
    assert free_subnet([]) == IPv4Network("10.231.0.0/24")
    taken = [IPv4Network("10.231.0.0/24"), IPv4Network("10.231.1.128/25")]
    assert free_subnet(taken) == IPv4Network("10.231.2.0/24")
    assert free_subnet([IPv4Network("172.17.0.0/16")]) == IPv4Network("10.231.0.0/24")


def test_every_node_gets_its_own_host_address_and_the_topology_follows() -> None:
    topo = load("sync")
    where = addresses(topo, IPv4Network("10.231.5.0/24"))
    assert list(where) == [n.name for n in topo.nodes]
    assert where[topo.nodes[0].name] == "10.231.5.10" and len(set(where.values())) == len(topo.nodes)
    moved = at_addresses(topo, where)
    assert {n.name: moved.address_of(n) for n in moved.nodes} == where
    assert moved.zookeeper_connect().startswith("10.231.5.10:")


def test_host_kinds_take_all_or_names_and_refuse_unknown_or_both() -> None:
    topo = load("sync")
    assert set(kinds_of(topo, ["all"], []).values()) == {"systemd"}
    kinds = kinds_of(topo, ["bk2-us"], ["zk"])
    assert (kinds["bk2-us"], kinds["zk"], kinds["bk1-eu"]) == ("systemd", "bare", "plain")
    with pytest.raises(UsageError, match="no node named bk9"):
        kinds_of(topo, ["bk9"], [])
    with pytest.raises(UsageError, match="zk: a bare host has no Java and no systemd"):
        kinds_of(topo, ["zk"], ["zk"])
    with pytest.raises(UsageError, match="no node named zk2"):  # --sent names hosts too
        kinds_of(topo, [], [], sent=["zk2"])


def test_up_again_with_other_kinds_or_nodes_is_refused_before_the_engine_is_asked(tmp_path) -> None:
    """A second ``hosts up`` on a folder keeps the hosts that run: asked for other kinds of hosts
    (or another topology's nodes) it refuses, naming each difference, instead of leaving a plain
    host where the inventory now says systemd. The engine named does not exist: nothing is asked."""
    topo = load("smoke")
    made = kinds_of(topo, ["all"], [])
    Lab(str(tmp_path), "unix:///nowhere.sock", "pulsarlab-lab-x", "10.231.3.0/24",
        {n: {"address": "10.231.3.10", "kind": k, "container": f"c-{n}"} for n, k in made.items()}).save()
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UsageError, match=r"hosts of other kinds \(zk is systemd, asked plain; .*'pulsarlab hosts down' it first"):
        up("smoke", tmp_path, [], [], docker_host="unix:///nowhere.sock")
    with pytest.raises(UsageError, match=r"bk1 is systemd, asked bare"):
        up("smoke", tmp_path, ["zk", "bk2", "bk3", "pulsar1"], ["bk1"], docker_host="unix:///nowhere.sock")
    with pytest.raises(UsageError, match=r"a lab of other nodes \(bk1, bk2, bk3, pulsar1, zk\)"):
        up("sync", tmp_path, [], [], docker_host="unix:///nowhere.sock")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    old = Lab.read(tmp_path)
    assert old is not None and reuse_problem(old, made) is None  # the same again: completed, not refused


def test_hosts_are_reached_over_ssh_with_the_labs_key_and_known_hosts(tmp_path) -> None:
    lab = Lab(str(tmp_path), "unix:///x.sock", "pulsarlab-lab-x", "10.231.3.0/24")
    conn = connection(lab)
    assert (conn["ansible_connection"], conn["ansible_user"]) == ("ssh", "root")
    assert conn["ansible_python_interpreter"] == "/usr/bin/python3"  # the images' python3: no discovery per run
    assert conn["ansible_ssh_private_key_file"] == str(tmp_path / "ssh" / "id_ed25519")
    assert f"UserKnownHostsFile={tmp_path / 'ssh' / 'known_hosts'}" in conn["ansible_ssh_common_args"]
    assert lab.gateway == "10.231.3.1"


def test_the_mirror_sits_below_the_hosts_and_outside_their_addresses() -> None:
    subnet = IPv4Network("10.231.3.0/24")
    assert mirror_address(subnet) == "10.231.3.2"
    assert mirror_address(subnet) not in addresses(load("sync"), subnet).values()


def test_a_cut_between_hosts_drops_both_ways_on_each_host_of_a_pair() -> None:
    rules = netfilter.host_cut("pulsarlab:abc", "partition eu us", {"a1": "10.0.0.1", "a2": "10.0.0.2"}, {"b1": "10.0.0.3"})
    assert set(rules) == {"a1", "a2", "b1"}
    note = '-m comment --comment "pulsarlab:abc partition eu us" -j DROP'
    assert rules["a1"] == [f"INPUT -s 10.0.0.3/32 {note}", f"OUTPUT -d 10.0.0.3/32 {note}"]
    assert sorted(rules["b1"]) == sorted([f"INPUT -s 10.0.0.1/32 {note}", f"OUTPUT -d 10.0.0.1/32 {note}",
                                          f"INPUT -s 10.0.0.2/32 {note}", f"OUTPUT -d 10.0.0.2/32 {note}"])
    assert netfilter.host_cut("pulsarlab:abc", "x", {"n": "10.0.0.1"}, {"n": "10.0.0.1"}) == {}  # not from itself
    assert netfilter.host_rule_comment(rules["a1"][0]) == "pulsarlab:abc partition eu us"


def test_a_mute_on_a_host_drops_only_what_its_ports_send_to_this_machine() -> None:
    [rule] = netfilter.host_mute("pulsarlab:abc", "mute p1", "p1", [8080, 6650])["p1"]
    assert rule.startswith(f"OUTPUT -d {netfilter.CONTROLLER}/32 -p tcp -m multiport --sports 6650,8080 ")
    with pytest.raises(ValueError, match="unusable rule label"):
        netfilter.host_mute("pulsarlab:abc", 'mute "x"', "p1", [1])
