"""``compose/sync.yml`` under plain Docker Compose, no pulsarlab in the loop: the one-shot
configuration exits 0, every broker knows its region from its first start, placement is proven by
``pulsarlab attach`` + ``inspect placement`` against its URLs, Prometheus has every node up, and a
second ``up`` changes nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.compose_files import write_compose_files
from pulsarlab.distribution import DEFAULT_VERSION
from pulsarlab.monitoring.prometheus import Prometheus
from pulsarlab.runtime.docker import image
from pulsarlab.runtime.docker.prometheus_image import TAG as PROMETHEUS_TAG
from pulsarlab.runtime.docker.prometheus_image import ensure_prometheus_image
from pulsarlab.runtime.external import ExternalCluster
from pulsarlab.topology import BUILTIN_DIR, BUILTINS, Role, load
from tests.cluster.test_sync import _produce, assert_placed_in_both_regions
from tests.eventually import EventuallyTimeout, eventually
from tests.scenario_files import scaled_builtin

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
CONFIGURE_TIMEOUT_S = 900


def compose(file: Path, host: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": host, "PULSARLAB_IMAGE": image.default_tag(DEFAULT_VERSION),
           "PULSARLAB_PROMETHEUS_IMAGE": PROMETHEUS_TAG}
    return subprocess.run(["docker", "compose", "-f", str(file), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def configure_exit(file: Path, host: str) -> int:
    """Wait for the one-shot ``configure`` service to exit; its exit code."""

    def exited() -> int:
        ps = compose(file, host, "ps", "-a", "--format", "json", "configure").stdout.strip().splitlines()
        states = [json.loads(line) for line in ps if line.strip()]
        assert states and states[0]["State"] == "exited", states
        return int(states[0]["ExitCode"])

    try:
        return eventually(exited, timeout=CONFIGURE_TIMEOUT_S, interval=3, what="the configure service exited")
    except EventuallyTimeout as exc:
        tail = compose(file, host, "logs", "--tail", "30", "configure").stdout
        raise AssertionError(f"{exc}; its last lines:\n{tail}") from None


@pytest.fixture(scope="module")
def compose_sync(docker_host: str, cluster_pool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """compose/sync.yml up (re-rendered at the lane's addresses when tests run beside another cluster)."""
    cluster_pool.close()  # the nodes bind the addresses the local clusters use
    image.ensure_image(host=docker_host)
    ensure_prometheus_image(host=docker_host)
    root = tmp_path_factory.mktemp("compose")
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")
    file = REPO / "compose" / "sync.yml"
    if prefix:
        topo_file = root / "sync.yaml"
        spec = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
        topo_file.write_text(yaml.safe_dump({**spec, "address_prefix": prefix}))
        [file] = write_compose_files({"sync": load(str(topo_file))}, root)
    t0 = time.monotonic()
    up = compose(file, docker_host, "up", "-d")
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        code = configure_exit(file, docker_host)
        print(f"compose/sync.yml: up -d and configure done in {time.monotonic() - t0:.1f}s")
        assert code == 0, compose(file, docker_host, "logs", "configure").stdout[-4000:]
        yield file, docker_host
    finally:
        down = compose(file, docker_host, "down", "-v", "--timeout", "20")
        assert down.returncode == 0, down.stderr[-2000:]
        left = compose(file, docker_host, "ps", "-a", "-q").stdout.strip()
        assert left == "", f"containers left after down: {left}"


def test_every_compose_file_is_accepted_by_compose(docker_host: str) -> None:
    for name in BUILTINS:
        done = compose(REPO / "compose" / f"{name}.yml", docker_host, "config", "-q", timeout=60)
        assert done.returncode == 0, f"compose/{name}.yml: {done.stderr}"


def test_plain_compose_gives_the_configured_stretch_cluster(compose_sync: tuple[Path, str], tmp_path: Path) -> None:
    file, host = compose_sync
    topo = load(str(file.parent / "sync.yaml")) if (file.parent / "sync.yaml").is_file() else load("sync")
    for b in topo.nodes_of(Role.BROKER):  # racks were in place before any broker's BookKeeper client started
        log = compose(file, host, "logs", "--no-log-prefix", b.name).stdout
        seen = re.findall(r"Initialize rackaware ensemble placement policy @ <Bookie:[^>]+> @ (\S+) ", log)
        assert seen and seen[0].strip("/").split("/")[0] == b.region, (b.name, seen)

    state = tmp_path / "attached"
    topo_ref = str(file.parent / "sync.yaml") if (file.parent / "sync.yaml").is_file() else "sync"
    r = CliRunner().invoke(app, ["attach", "--topology", topo_ref, "--state-dir", str(state), "--timeout", "120"])
    assert r.exit_code == 0, r.output
    assert CliRunner().invoke(app, ["configure", "--dry-run", "--state-dir", str(state), "--json"]).exit_code == 0
    report = json.loads(CliRunner().invoke(app, ["configure", "--dry-run", "--state-dir", str(state), "--json"]).stdout)
    assert report["changes"] == [], report  # what the one-shot applied is what pulsarlab would have
    cluster = ExternalCluster.open(state)
    topic = f"persistent://mytenant/eu/compose-{uuid.uuid4().hex[:8]}"
    _produce(cluster, [f"c-{i}".encode() for i in range(200)], topic)
    assert_placed_in_both_regions(cluster, topic)
    assert "node control through Compose project pulsarlab-" in " ".join(r.output.split()), r.output

    targets = Prometheus(topo, state).wait_targets_up(120)  # the compose file's Prometheus, at the same address
    assert sorted(t.node for t in targets if t.health == "up") == sorted(n.name for n in topo.nodes)


@pytest.fixture(scope="module")
def attached(compose_sync: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Compose project attached by pulsarlab (the project found by itself): its state folder."""
    file, _ = compose_sync
    state = tmp_path_factory.mktemp("attached") / "state"
    topo_ref = str(file.parent / "sync.yaml") if (file.parent / "sync.yaml").is_file() else "sync"
    r = CliRunner().invoke(app, ["attach", "--topology", topo_ref, "--state-dir", str(state), "--timeout", "120"])
    assert r.exit_code == 0, r.output
    yield state
    assert CliRunner().invoke(app, ["down", "--state-dir", str(state)]).exit_code == 0


def test_node_commands_act_on_the_projects_containers(compose_sync: tuple[Path, str], attached: Path) -> None:
    """kill leaves the container down (its restart policy does not bring it back), start brings it
    back ready; pause freezes it; down only detaches: every container still runs."""
    file, host = compose_sync

    def state(node: str) -> dict:
        ps = compose(file, host, "ps", "-a", "--format", "json", node).stdout.strip().splitlines()
        return json.loads(ps[0])

    def cli(*args: str) -> str:
        r = CliRunner().invoke(app, [*args, "--state-dir", str(attached)])
        assert r.exit_code == 0, r.output
        return r.stdout

    cli("node", "kill", "bk2-us")
    assert state("bk2-us")["State"] == "exited"
    time.sleep(3)
    assert state("bk2-us")["State"] == "exited", "the restart policy brought a killed node back"
    down = CliRunner().invoke(app, ["status", "--json", "--state-dir", str(attached)])
    assert down.exit_code == 1  # a node down: the cluster is not healthy
    status = {n["name"]: n for n in json.loads(down.stdout)["nodes"]}
    assert status["bk2-us"]["alive"] is False and status["bk1-us"]["ready"] is True
    cli("node", "start", "bk2-us")
    assert state("bk2-us")["State"] == "running"
    cli("node", "pause", "pulsar2-us")
    assert state("pulsar2-us")["State"] == "paused"
    cli("node", "resume", "pulsar2-us")
    status = {n["name"]: n for n in json.loads(cli("status", "--json"))["nodes"]}
    assert all(n["alive"] and n["ready"] and not n["paused"] for n in status.values()), status


def test_a_scenario_runs_on_the_attached_project_and_leaves_it_running(compose_sync: tuple[Path, str],
                                                                       attached: Path, tmp_path: Path) -> None:
    """sync-bookie-loss on the Compose project (``--on``): no acknowledged message lost, the killed
    bookie's container started again by the scenario, and every node running afterwards."""
    spec = scaled_builtin("sync-bookie-loss", tmp_path / "spec")
    r = CliRunner().invoke(app, ["scenario", "run", str(spec), "--on", str(attached), "--json",
                                 "--out", str(tmp_path / "runs")])
    v = json.loads(r.stdout)
    assert r.exit_code == 0, json.dumps(v, indent=2)
    assert v["status"] == "pass" and v["rpo"] == 0
    assert [(f["fault"], f["outcome"]) for f in v["faults"]] == [("kill bk1-eu", "ok"), ("start bk1-eu", "ok")]
    status = json.loads(CliRunner().invoke(app, ["status", "--json", "--state-dir", str(attached)]).stdout)
    assert all(n["alive"] and n["ready"] for n in status["nodes"]), status


def test_a_second_up_changes_nothing(compose_sync: tuple[Path, str]) -> None:
    file, host = compose_sync
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    again = compose(file, host, "up", "-d")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Recreate" not in again.stderr, again.stderr  # no node container replaced
    assert configure_exit(file, host) == 0
    log = compose(file, host, "logs", "--no-log-prefix", "--since", since, "configure").stdout
    assert "already applied: every item read, nothing differed, nothing written" in log, log[-3000:]
    assert "reading everything back" not in log  # nothing written: the first pass's reads were the read-back
    writes = [ln for ln in log.splitlines() if ln.startswith("configure: ") and "bin/pulsar-admin" not in ln
              and not ln.startswith(("configure: reading", "configure: topology"))]
    assert writes == [], writes
