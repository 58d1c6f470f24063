"""The smoke topology on the docker runtime, with the secure profile on (token authentication,
authorization, TLS only): one compose project, real Pulsar in containers. Everything below runs
with the credentials pulsarlab generated; the open docker runtime runs in test_docker_sync.py.

Needs the engine (``.ci/run`` starts it; else the ``docker_host`` fixture does) and the image
(built here if its inputs changed, a no-op otherwise). Run under the cluster lock: the containers
bind the same 127.0.R.N addresses as the local smoke cluster, which is taken down first.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest
import requests
from typer.testing import CliRunner

from pulsarlab.admin.client import admin_of
from pulsarlab.cli import app
from pulsarlab.distribution import DEFAULT_VERSION
from pulsarlab.runtime.cds import image_archives
from pulsarlab.runtime.docker import image
from pulsarlab.runtime.docker.cluster import DockerCluster
from tests.cluster.conftest import docker_deployment, without_own_image
from tests.cluster.test_secure import REFUSED
from tests.cluster.test_smoke import assert_exactly_once, consume_all, produce
from tests.cluster.test_upgrade import changed_settings

runner = CliRunner()
OLD = "4.0.6"  # the rollback's release (the deployment runs the default, 4.0.8)


UP_SAID: list[str] = []
NO_BUILD: list = []


@pytest.fixture(scope="module")
def docker_smoke(docker_host: str, cluster_pool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerCluster]:
    """Up on an engine without pulsarlab's image, as on a fresh machine: first refused with
    --no-build, then built by up itself."""
    root = tmp_path_factory.mktemp("docker")
    cluster_pool.close()
    with without_own_image(docker_host):
        NO_BUILD.append(runner.invoke(app, ["up", "--runtime", "docker", "--no-build", "--state-dir", str(root / "refused")]))
        with docker_deployment("smoke", docker_host, cluster_pool, root, secure=True, said=UP_SAID) as cluster:
            yield cluster


def test_up_on_an_engine_without_the_image_builds_it_first_and_no_build_refuses(docker_smoke: DockerCluster) -> None:
    """As Compose builds a missing image: ``up`` said it built pulsarlab's image before any node
    started, and the engine has it now. With --no-build the missing image was refused, naming the
    fix, before anything was written."""
    built = [i for i, line in enumerate(UP_SAID) if line.startswith(f"image {docker_smoke.image} built")]
    started = [i for i, line in enumerate(UP_SAID) if "started (container" in line]
    assert built and started and built[0] < started[0], UP_SAID
    assert docker_smoke.docker.image.exists(docker_smoke.image)
    refused = NO_BUILD[0]
    assert refused.exit_code == 1, refused.output
    assert f"image {docker_smoke.image} is not in the Docker engine" in refused.stderr and "--no-build" in refused.stderr
    refused_dir = docker_smoke.state_dir.parent / "refused"
    assert not refused_dir.exists() or not any(refused_dir.iterdir()), list(refused_dir.iterdir())


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def test_status_shows_every_node_ready_in_its_container(docker_smoke: DockerCluster) -> None:
    report = json.loads(cli("status", "--json", "--state-dir", str(docker_smoke.state_dir)))
    assert report["runtime"] == "docker"
    assert {n["name"] for n in report["nodes"]} == {"zk", "bk1", "bk2", "bk3", "pulsar1"}
    assert all(n["ready"] and n["pid"] for n in report["nodes"])
    docker = docker_smoke.docker
    for n in report["nodes"]:
        c = docker.container.inspect(docker_smoke.container_name(n["name"]))
        assert c.state.running and c.state.pid == n["pid"]
        assert c.host_config.network_mode == "host" and c.host_config.init
        assert c.host_config.memory > 0
    # the node's log is on the host, where log_file says, written by the JVM in the container
    assert docker_smoke.log_file("pulsar1") == docker_smoke.state_dir / "nodes" / "pulsar1" / "logs" / "node.log"
    assert " INFO " in docker_smoke.log_tail("pulsar1", 200)


def test_containers_serve_tls_only_and_refuse_a_client_without_a_token(docker_smoke: DockerCluster) -> None:
    report = json.loads(cli("status", "--json", "--state-dir", str(docker_smoke.state_dir)))
    [urls] = report["clusters"]
    assert urls["service_url"].startswith("pulsar+ssl://") and urls["web_url"].startswith("https://")
    auth = docker_smoke.client_auth()
    assert auth is not None and auth.ca_file is not None
    tenants = f"{urls['web_url']}/admin/v2/tenants"
    # the broker's certificate, mounted into its container, names its address (hostname checked)
    assert requests.get(tenants, verify=str(auth.ca_file), timeout=10).status_code == 401
    assert requests.get(tenants, verify=str(auth.ca_file), headers=auth.headers(), timeout=10).status_code == 200
    broker = docker_smoke.topo.node("pulsar1")
    plain = pulsar.Client(f"pulsar://{docker_smoke.topo.address_of(broker)}:{broker.port('service')}",
                          operation_timeout_seconds=5, connection_timeout_ms=3000,
                          logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        with pytest.raises(REFUSED):
            plain.create_producer(f"persistent://smoke/test/docker-plain-{uuid.uuid4().hex[:8]}")
    finally:
        plain.close()


def test_thousand_messages_arrive_exactly_once(docker_smoke: DockerCluster) -> None:
    assert_exactly_once(docker_smoke, f"persistent://smoke/test/docker-once-{uuid.uuid4().hex[:8]}", 1000, "m")


def test_changed_settings_reach_the_containers_dynamic_through_the_api_and_static_by_restarting_only_that_node(
        docker_smoke: DockerCluster, tmp_path: Path) -> None:
    """Settings changed on running containers (issue 31): a dynamic broker key at the top level
    goes through the admin API, no container restarted for it; a static bookie key on bk2 alone
    restarts bk2's container only (through the rolling gates), whose JVM then runs with it; a
    second ``up`` finds nothing left to change."""
    new = changed_settings(docker_smoke.state_dir, tmp_path)
    state = str(docker_smoke.state_dir)
    before = {n.name: docker_smoke.process_info(n.name)[0] for n in docker_smoke.topo.nodes}

    applied = runner.invoke(app, ["up", "--topology", str(new), "--runtime", "docker", "--state-dir", state, "--apply"])
    assert applied.exit_code == 0, applied.output
    after = {n.name: docker_smoke.process_info(n.name)[0] for n in docker_smoke.topo.nodes}
    assert [n for n in before if after[n] != before[n]] == ["bk2"], (before, after)
    admin = admin_of(docker_smoke, docker_smoke.topo.clusters[0].name)
    assert admin.get_json("/admin/v2/brokers/configuration/runtime")["brokerDeleteInactiveTopicsEnabled"] == "false"
    served = {}
    for name in ("bk1", "bk2"):  # what each bookie's JVM runs with, from its own HTTP API
        node = docker_smoke.topo.node(name)
        url = f"http://{docker_smoke.topo.address_of(node)}:{node.port('http')}/api/v1/config/server_config"
        served[name] = requests.get(url, timeout=10).json().get("gcWaitTime")
    assert served["bk2"] == "600000" and served["bk1"] != "600000", served

    again = runner.invoke(app, ["up", "--topology", str(new), "--runtime", "docker", "--state-dir", state])
    assert again.exit_code == 0 and "it matches its topology" in again.stdout, again.output


def test_a_rollback_moves_one_container_at_a_time_onto_the_older_release_and_keeps_the_data(
        docker_smoke: DockerCluster) -> None:
    """``pulsarlab upgrade --to 4.0.6`` (a rollback is the same path as an upgrade): pulsarlab's
    image of 4.0.6 is built before any node stops, then each container is recreated on it, one at
    a time in Pulsar's order, with its data volume; every node reports 4.0.6 itself (the bookies
    from the class path inside their containers); what was acknowledged before is read after, and
    a second run restarts nothing."""
    state = str(docker_smoke.state_dir)
    names = [n.name for n in docker_smoke.topo.nodes]
    assert {n["name"]: n["version"] for n in json.loads(cli("status", "--json", "--state-dir", state))["nodes"]} == dict.fromkeys(
        names, DEFAULT_VERSION)
    topic = f"persistent://smoke/test/docker-rollback-{uuid.uuid4().hex[:8]}"
    sent = produce(docker_smoke, topic, 300, "r")  # kept by a durable subscription through the rollback
    before = {n: docker_smoke.process_info(n)[0] for n in names}

    result = json.loads(cli("upgrade", "--to", OLD, "--state-dir", state, "--json"))
    assert [(n["node"], n["action"]) for n in result["nodes"]] == [(n, "moved") for n in ("zk", "bk1", "bk2", "bk3", "pulsar1")]
    status = json.loads(cli("status", "--json", "--state-dir", state))
    assert {n["name"]: (n["version"], n["ready"]) for n in status["nodes"]} == dict.fromkeys(names, (OLD, True))
    assert status["pulsar_version"] == OLD
    for name in names:  # a new container, on the older release's image, the same data volume
        c = docker_smoke.docker.container.inspect(docker_smoke.container_name(name))
        assert c.config.image == image.default_tag(OLD) and c.state.pid != before[name], (name, c.config.image)
    assert sorted(consume_all(docker_smoke, topic, len(sent))) == sorted(sent)

    moved = {n["name"]: n["pid"] for n in status["nodes"]}
    again = json.loads(cli("upgrade", "--to", OLD, "--state-dir", state, "--json"))
    assert {n["action"] for n in again["nodes"]} == {"kept"}
    assert {n["name"]: n["pid"] for n in json.loads(cli("status", "--json", "--state-dir", state))["nodes"]} == moved


def test_killed_bookie_container_keeps_producing_and_rejoins(docker_smoke: DockerCluster) -> None:
    state = str(docker_smoke.state_dir)
    # the engine runs on this machine: liveness is a look at the container's init process
    assert docker_smoke.alive("bk1") and "bk1" in docker_smoke._inits
    cli("node", "kill", "bk1", "--state-dir", state)
    c = docker_smoke.docker.container.inspect(docker_smoke.container_name("bk1"))
    assert not c.state.running and c.state.exit_code == 137  # SIGKILL, not a clean stop
    assert not docker_smoke.alive("bk1")

    # E=2 of the 2 bookies left
    assert_exactly_once(docker_smoke, f"persistent://smoke/test/docker-bookie-loss-{uuid.uuid4().hex[:8]}", 200, "k")

    cli("node", "start", "bk1", "--state-dir", state)
    status = json.loads(cli("status", "--json", "--state-dir", state))
    assert all(n["ready"] for n in status["nodes"])


def test_a_one_off_containers_exit_code_comes_when_it_exits_and_none_after_the_limit(docker_smoke: DockerCluster) -> None:
    """How the metadata initialisation's container is waited for: its exit code as soon as it
    exits; one still running at the limit is killed and gives None."""
    docker, tag = docker_smoke.docker, uuid.uuid4().hex[:8]
    quick, stuck = f"pulsarlab-test-exit-{tag}", f"pulsarlab-test-stuck-{tag}"
    try:
        docker.container.run(docker_smoke.image, ["bash", "-c", "sleep 1; exit 3"], detach=True, name=quick)
        docker.container.run(docker_smoke.image, ["sleep", "600"], detach=True, name=stuck)
        t0 = time.monotonic()
        assert docker_smoke._exit_code(quick, 60) == 3
        assert docker_smoke._exit_code(stuck, 1.5) is None
        assert time.monotonic() - t0 < 20
        assert not docker.container.inspect(stuck).state.running
    finally:
        for name in (quick, stuck):
            if docker.container.exists(name):
                docker.container.remove(name, force=True)


def _mapped(cluster: DockerCluster, name: str) -> set[str]:
    """The class archives the node's JVM maps (paths as its container sees them)."""
    jvm = cluster._jvm(name)
    assert jvm is not None, name
    maps = Path(f"/proc/{jvm.pid}/maps").read_text()
    return {line.split()[-1] for line in maps.splitlines() if line.endswith(".jsa") and "/pulsarlab-cds/" in line}


def test_the_first_bookie_records_its_roles_class_archive_and_maps_it_from_its_next_start(
        docker_smoke: DockerCluster) -> None:
    """Class-data sharing in containers: while its image has no bookie archive, the first bookie
    records one (into the image's folder on the host, mounted into every node); its stop (SIGTERM:
    the JVM exits by itself) promotes it; its next start maps it."""
    state = str(docker_smoke.state_dir)
    bk1 = docker_smoke._container("bk1")
    assert bk1 is not None and bk1.config.image  # the rollback above moved it onto another image
    folder = image_archives(docker_smoke.docker.image.inspect(bk1.config.image).id).root
    # stopped first: a bk1 that is recording now (its image had no archive when it started, as on a
    # machine where no bookie of this image has stopped yet) promotes its recording here
    cli("node", "stop", "bk1", "--state-dir", state)
    (folder / "bookie.jsa").unlink(missing_ok=True)  # as where no bookie of this image has stopped yet
    cli("node", "start", "bk1", "--state-dir", state)
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in docker_smoke.jvm_command_line("bk1") or [])
    assert _mapped(docker_smoke, "bk1") == set()
    cli("node", "stop", "bk1", "--state-dir", state)
    assert (folder / "bookie.jsa").is_file() and not list(folder.glob("bookie.bk1.*.jsa.part"))
    cli("node", "start", "bk1", "--state-dir", state)
    assert _mapped(docker_smoke, "bk1") == {"/pulsarlab-cds/bookie.jsa"}
    assert not any(a.startswith("-XX:ArchiveClassesAtExit=") for a in docker_smoke.jvm_command_line("bk1") or [])


def test_down_leaves_no_container_or_volume_of_the_project(docker_smoke: DockerCluster) -> None:
    assert len(docker_smoke.project_volumes()) == 5
    cli("down", "--state-dir", str(docker_smoke.state_dir))
    assert docker_smoke.project_containers() == []
    assert docker_smoke.project_volumes() == []
    assert not Path(docker_smoke.state_dir / "state.json").exists()
