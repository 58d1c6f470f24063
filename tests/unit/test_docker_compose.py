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


def _shared(tmp_path: Path) -> tuple[compose.ClassSharing, Path]:
    folder = tmp_path / "archives"
    (folder / "classpath").mkdir(parents=True)
    return compose.ClassSharing({"pulsarlab/pulsar:4.0.8": folder},
                                {"bk1": "bookie.bk1.x.jsa.part", "init-smoke": "init.smoke.x.jsa.part"}), folder


def _jvm_options(command: list[str], cds: Path, tmp_path: Path) -> str:
    """What ``bin/pulsar`` would get: the service's shell run by bash as the container runs it,
    with the archive folder at ``cds`` and ``bin/pulsar`` replaced by a printer of its variables."""
    script = command[2].replace("$$", "$").replace(str(compose.CONTAINER_CDS), str(cds))
    script = script.replace("exec bin/pulsar", "printf '%s|%s' \"$PULSAR_EXTRA_OPTS\" \"$BOOKIE_EXTRA_OPTS\"; : ")
    out = subprocess.run(["bash", "-c", script.split(" >>")[0]], capture_output=True, text=True,
                         env={"PULSAR_EXTRA_OPTS": "-Da=1", "BOOKIE_EXTRA_OPTS": "-Db=2", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_with_class_sharing_the_first_node_of_a_role_records_until_an_archive_exists_then_all_map_it(
        tmp_path: Path) -> None:
    topo = load("smoke")
    cds, folder = _shared(tmp_path)
    compose.render_compose(topo, tmp_path / "out", "pulsarlab/pulsar:4.0.8", cds=cds)
    doc = yaml.safe_load((tmp_path / "out" / compose.COMPOSE_FILE).read_text())
    for name in ("bk1", "bk2", "pulsar1"):
        svc = doc["services"][name]
        assert {"type": "bind", "source": str(folder), "target": str(compose.CONTAINER_CDS)} in svc["volumes"]
        # one classpath for every node: the log configuration's folder (bin/pulsar puts it first) is empty
        assert svc["environment"]["PULSAR_LOG_CONF"] == str(compose.CONTAINER_CDS / "classpath" / "log4j2.yaml")
        assert f"-Dlog4j.configurationFile={compose.CONTAINER.conf / 'log4j2.yaml'}" in svc["environment"]["PULSAR_EXTRA_OPTS"]
    bk1, bk2 = doc["services"]["bk1"]["command"], doc["services"]["bk2"]["command"]
    # no archive yet: bk1 records (to the file named for it), bk2 starts as it always did
    assert _jvm_options(bk1, folder, tmp_path) == (f"-Da=1 -XX:ArchiveClassesAtExit={folder}/bookie.bk1.x.jsa.part|"
                                                   f"-Db=2 -XX:ArchiveClassesAtExit={folder}/bookie.bk1.x.jsa.part")
    assert _jvm_options(bk2, folder, tmp_path) == "-Da=1 |-Db=2 "
    (folder / "bookie.jsa").write_bytes(b"archive")  # promoted after bk1 stopped by itself
    for command in (bk1, bk2):
        assert _jvm_options(command, folder, tmp_path) == (f"-Da=1 -XX:SharedArchiveFile={folder}/bookie.jsa -Xshare:auto|"
                                                           f"-Db=2 -XX:SharedArchiveFile={folder}/bookie.jsa -Xshare:auto")
    init = doc["services"][compose.INIT_SERVICE]
    assert {"type": "bind", "source": str(folder), "target": str(compose.CONTAINER_CDS)} in init["volumes"]


def test_an_image_without_an_archive_folder_and_the_files_for_users_mount_nothing(tmp_path: Path) -> None:
    cds, _ = _shared(tmp_path)
    compose.render_compose(load("smoke"), tmp_path / "a", "pulsarlab/pulsar:other", cds=cds)
    compose.render_compose(load("smoke"), tmp_path / "b", "pulsarlab/pulsar:4.0.8")
    for out in ("a", "b"):
        text = (tmp_path / out / compose.COMPOSE_FILE).read_text()
        assert str(compose.CONTAINER_CDS) not in text
