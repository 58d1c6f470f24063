"""The compose project of a deployment, as rendered (no engine needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from pulsarlab.render import parse_properties
from pulsarlab.runtime.docker import compose
from pulsarlab.topology import Role, load


def rendered(topology: str, out: Path) -> dict:
    compose.render_compose(load(topology), out, "pulsarlab/pulsar:test")
    return yaml.safe_load((out / compose.COMPOSE_FILE).read_text())


def test_one_service_per_node_named_as_the_topology(tmp_path: Path) -> None:
    topo = load("sync")
    doc = rendered("sync", tmp_path)
    nodes = {n.name for n in topo.nodes}
    assert set(doc["services"]) == nodes | {compose.INIT_SERVICE}
    assert doc["services"][compose.INIT_SERVICE]["profiles"] == ["tools"]  # never started by a plain `up`
    for name in nodes:
        svc = doc["services"][name]
        assert svc["network_mode"] == "host" and svc["init"] is True
        assert svc["image"] == "pulsarlab/pulsar:test"
        assert svc["container_name"] == f"{doc['name']}-{name}"
        assert svc["labels"]["org.pulsarlab.node"] == name
    assert set(doc["volumes"]) == {f"data-{n}" for n in nodes}


def test_a_node_an_upgrade_moved_runs_its_own_image_and_the_others_the_deployments(tmp_path: Path) -> None:
    topo = load("smoke")
    compose.render_compose(topo, tmp_path, "pulsarlab/pulsar:4.0.8", node_images={"zk": "pulsarlab/pulsar:4.0.6"})
    doc = yaml.safe_load((tmp_path / compose.COMPOSE_FILE).read_text())
    images = {name: svc["image"] for name, svc in doc["services"].items()}
    assert images == {"zk": "pulsarlab/pulsar:4.0.6", "bk1": "pulsarlab/pulsar:4.0.8", "bk2": "pulsarlab/pulsar:4.0.8",
                      "bk3": "pulsarlab/pulsar:4.0.8", "pulsar1": "pulsarlab/pulsar:4.0.8",
                      compose.INIT_SERVICE: "pulsarlab/pulsar:4.0.8"}


def test_each_node_mounts_its_own_rendered_conf_read_only(tmp_path: Path) -> None:
    topo = load("smoke")
    doc = rendered("smoke", tmp_path)
    for node in topo.nodes:
        conf, logs, data = doc["services"][node.name]["volumes"]
        assert conf == {"type": "bind", "source": str(tmp_path / "nodes" / node.name / "conf"),
                        "target": "/pulsarlab/conf", "read_only": True}
        assert logs["source"] == str(tmp_path / "nodes" / node.name / "logs") and Path(logs["source"]).is_dir()
        assert data == {"type": "volume", "source": f"data-{node.name}", "target": "/pulsar/data"}
        env = doc["services"][node.name]["environment"]
        conf_file = {Role.ZOOKEEPER: "PULSAR_ZK_CONF", Role.BOOKIE: "PULSAR_BOOKKEEPER_CONF",
                     Role.BROKER: "PULSAR_BROKER_CONF"}[node.role]
        name = Path(env[conf_file]).name
        assert (Path(conf["source"]) / name).is_file()  # the file bin/pulsar reads is in the mount
    bookie = parse_properties((tmp_path / "nodes/bk1/conf/bookkeeper.conf").read_text())
    assert bookie["journalDirectories"] == "/pulsar/data/journal"  # container paths, in the volume
    assert bookie["advertisedAddress"] == topo.address_of(topo.node("bk1"))


def test_broker_sees_its_own_address_and_memory_is_limited(tmp_path: Path) -> None:
    topo = load("sync")
    doc = rendered("sync", tmp_path)
    broker = topo.nodes_of(Role.BROKER)[0]
    svc = doc["services"][broker.name]
    assert "-Djdk.net.hosts.file=/pulsarlab/conf/hosts" in svc["environment"]["PULSAR_EXTRA_OPTS"]
    hosts = (tmp_path / "nodes" / broker.name / "conf" / "hosts").read_text()
    assert hosts.split()[0] == topo.address_of(broker)
    assert f"-Xmx{topo.jvm.broker_heap_mb}m" in svc["environment"]["PULSAR_MEM"]
    limit = int(svc["mem_limit"].removesuffix("m"))
    assert limit == topo.jvm.broker_heap_mb + topo.jvm.broker_direct_mb + compose.MEMORY_OVERHEAD_MB
    assert svc["memswap_limit"] == svc["mem_limit"]


def test_health_checks_need_only_bash(tmp_path: Path) -> None:
    topo = load("smoke")
    doc = rendered("smoke", tmp_path)
    for node in topo.nodes:
        test = doc["services"][node.name]["healthcheck"]["test"]
        assert test[:3] == ["CMD", "bash", "-c"]
        assert f"/dev/tcp/{topo.address_of(node)}/" in test[3]
        assert "$$" in test[3]  # escaped: compose would substitute $answer / $status itself
    # the scripts run in bash as written (after compose's $$ -> $), against nothing listening
    script = doc["services"]["zk"]["healthcheck"]["test"][3].replace("$$", "$")
    assert subprocess.run(["bash", "-n", "-c", script]).returncode == 0


def test_two_state_dirs_never_share_a_project(tmp_path: Path) -> None:
    topo = load("smoke")
    a, b = compose.project_name(topo, tmp_path / "a"), compose.project_name(topo, tmp_path / "b")
    assert a != b and a.startswith("pulsarlab-smoke-")
    assert a == compose.project_name(topo, tmp_path / "a")
