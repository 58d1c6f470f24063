"""`render --runtime ansible` (inventory, group vars, each host's files) and `inventory validate`."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import yaml
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.render import render
from pulsarlab.topology import BUILTIN_DIR, load

runner = CliRunner()


def fake_distribution(tmp_path: Path) -> Path:
    """A folder laid out like a server distribution (what ``verify_tree`` checks), each shipped
    configuration with one default of its own, so that the test needs no download."""
    home = tmp_path / "apache-pulsar-9.9.9"
    for name in ("bin/pulsar", "bin/pulsar-perf", "lib/org.apache.pulsar-pulsar-broker-9.9.9.jar",
                 "lib/org.apache.bookkeeper-bookkeeper-server-1.jar", "lib/org.apache.zookeeper-zookeeper-1.jar"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("")
    for conf in ("broker.conf", "bookkeeper.conf", "zookeeper.conf"):
        (home / "conf").mkdir(exist_ok=True)
        (home / "conf" / conf).write_text(f"shippedDefault={conf}\n")
    return home


def render_ansible(tmp_path: Path, topology: str = "sync") -> Path:
    out = tmp_path / "ansible"
    dist = tmp_path / "apache-pulsar-9.9.9"
    if not dist.is_dir():
        fake_distribution(tmp_path)
    result = runner.invoke(app, ["render", "--topology", topology, "--runtime", "ansible", "--out", str(out),
                                 "--distribution", str(dist)])
    assert result.exit_code == 0, result.output
    return out


def test_inventory_groups_hosts_by_role_cluster_and_region(tmp_path: Path) -> None:
    topo = load("sync")
    inv = yaml.safe_load((render_ansible(tmp_path) / "inventory.yml").read_text())["all"]["children"]
    assert set(inv["zookeeper"]["hosts"]) == {"zk"}
    assert set(inv["bookies"]["hosts"]) == {"bk1-eu", "bk2-eu", "bk1-us", "bk2-us"}
    assert set(inv["brokers"]["hosts"]) == {"pulsar1-eu", "pulsar2-eu", "pulsar1-us", "pulsar2-us"}
    assert set(inv["bookies_first"]["hosts"]) == {"bk1-eu"}  # one cluster: one bookie starts alone
    assert set(inv["region_us"]["hosts"]) == {n.name for n in topo.nodes if n.region == "us"}
    assert set(inv["cluster_mycluster"]["hosts"]) == {n.name for n in topo.nodes if n.cluster == "mycluster"}
    for group in ("zookeeper", "bookies", "brokers"):
        for name, hv in inv[group]["hosts"].items():
            node = topo.node(name)
            assert hv["ansible_host"] == hv["pulsar_address"] == topo.address_of(node)
            where = (hv["pulsar_region"], hv["pulsar_rack"], hv["pulsar_cluster"])
            assert where == (node.region, topo.rack_of(node), node.cluster)
            assert hv["pulsar_role"] == node.role.value


def test_each_host_gets_the_same_configuration_as_every_runtime(tmp_path: Path) -> None:
    """One set of templates: a host's files are the local runtime's, with the host's paths."""
    topo = load("sync")
    out = render_ansible(tmp_path)
    local = tmp_path / "local"
    render(topo, local, tmp_path / "apache-pulsar-9.9.9" / "conf")
    for node in topo.nodes:
        for f in (local / "nodes" / node.name / "conf").iterdir():
            expected = f.read_text().replace(str(local / "nodes"), "/var/lib/pulsarlab/nodes")
            assert (out / "host_files" / node.name / "conf" / f.name).read_text() == expected, (node.name, f.name)
    conf = (out / "host_files" / "bk1-eu" / "conf" / "bookkeeper.conf").read_text()
    assert "advertisedAddress=127.0.1.2" in conf and "/var/lib/pulsarlab/nodes/bk1-eu/data" in conf
    assert "shippedDefault=bookkeeper.conf" in conf  # the distribution's own defaults kept
    group_vars = yaml.safe_load((out / "group_vars" / "all.yml").read_text())
    assert group_vars["pulsar_home"] == "/opt/pulsar/apache-pulsar-9.9.9"
    assert group_vars["pulsar_artifact"].endswith("pulsar-server-distribution-9.9.9-bin.tar.gz")
    assert group_vars["pulsar_metadata_init"]["mycluster"].count("initialize-cluster-metadata") == 1
    racks = {bookie: where["rack"] for doc in group_vars["pulsar_racks"] for group in doc["doc"].values()
             for bookie, where in group.items()}
    assert racks["127.0.1.2:3181"] == "eu/1" and racks["127.0.2.2:3181"] == "us/1"


def hosts_file(tmp_path: Path, **changes: str) -> Path:
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    for i, node in enumerate(data["nodes"]):
        node["address"] = changes.get(node["name"], f"10.0.{1 + i // 5}.{10 + i}")
    path = tmp_path / f"hosts-{len(list(tmp_path.glob('hosts-*')))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_accepts_hosts_with_their_own_addresses(tmp_path: Path) -> None:
    result = runner.invoke(app, ["inventory", "validate", str(hosts_file(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["valid"] and doc["problems"] == []
    assert doc["summary"].startswith("9 hosts (zookeeper 1, bookies 4, brokers 4)")


def test_validate_names_every_problem_and_exits_1(tmp_path: Path) -> None:
    path = hosts_file(tmp_path, **{"bk1-eu": "127.0.0.5", "bk2-us": "127.0.0.6"})
    result = runner.invoke(app, ["inventory", "validate", str(path)])
    assert result.exit_code == 1
    assert "bk1-eu: 127.0.0.5 is a loopback address" in result.stderr
    assert "bk2-us: 127.0.0.6 is a loopback address" in result.stderr

    clashing = hosts_file(tmp_path, **{"bk2-eu": "10.9.9.9", "bk1-us": "10.9.9.9"})
    clash = runner.invoke(app, ["inventory", "validate", str(clashing)])
    assert clash.exit_code == 1 and "10.9.9.9:3181 clashes with node bk2-eu" in clash.stderr

    builtin = runner.invoke(app, ["inventory", "validate", str(BUILTIN_DIR / "smoke.yaml")])
    assert builtin.exit_code == 1
    assert builtin.stderr.count("no address") == 5


def test_validate_reports_an_invalid_topology_in_one_line(tmp_path: Path) -> None:
    data = yaml.safe_load(hosts_file(tmp_path).read_text())
    data["clusters"][0]["persistence"] = {"ensemble": 2, "write_quorum": 3, "ack_quorum": 2}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["inventory", "validate", str(bad)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "write_quorum" in lines[0]


def test_own_hosts_render_with_their_addresses(tmp_path: Path) -> None:
    hosts = hosts_file(tmp_path)
    out = render_ansible(tmp_path, str(hosts))
    inv = yaml.safe_load((out / "inventory.yml").read_text())["all"]["children"]
    assert inv["zookeeper"]["hosts"]["zk"]["ansible_host"] == "10.0.1.10"
    assert "advertisedAddress=10.0.1.11" in (out / "host_files" / "bk1-eu" / "conf" / "bookkeeper.conf").read_text()
    local = runner.invoke(app, ["render", "--topology", str(hosts), "--out", str(tmp_path / "local")])
    assert local.exit_code != 0 and "not a loopback address" in local.output  # this machine's runtimes refuse them


def test_every_wait_of_the_playbooks_gets_the_factor_the_inventory_was_rendered_with(
        tmp_path: Path, monkeypatch) -> None:
    """A slow site sets PULSARLAB_TIMEOUT_SCALE once: the rendered group vars carry it, and every
    playbook variable that bounds a wait is that many times its bound (and its bound without it)."""
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "3")
    group = yaml.safe_load((render_ansible(tmp_path) / "group_vars" / "all.yml").read_text())
    assert group["pulsar_timeout_scale"] == 3
    playbooks = Path(__file__).resolve().parents[2] / "playbooks"
    order = yaml.safe_load((playbooks / "roles/pulsar_node/files/upgrade_order.yml").read_text())
    scaled: dict[str, str] = {}

    def collect(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, str) and "pulsar_timeout_scale" in value:
                    scaled[key] = value
                collect(value)
        elif isinstance(node, list):
            for item in node:
                collect(item)

    for path in playbooks.rglob("*.yml"):
        collect(yaml.safe_load(path.read_text()))
    assert {"pulsar_node_ready_timeout", "pulsar_node_underreplicated_timeout", "pulsar_replace_timeout",
            "pulsar_failover_lookup_timeout", "pulsarlab_attach_timeout"} <= set(scaled)
    env = jinja2.Environment()
    for key, expr in scaled.items():
        values = [int(env.from_string(expr).render(pulsar_timeout_scale=s, pulsar_upgrade=order["pulsar_upgrade"]))
                  for s in (1, group["pulsar_timeout_scale"])]
        assert values[1] == 3 * values[0] > 0, (key, expr, values)
        assert int(env.from_string(expr).render(pulsar_upgrade=order["pulsar_upgrade"])) == values[0], (key, "no factor given")
