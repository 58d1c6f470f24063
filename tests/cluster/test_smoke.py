"""The smoke cluster, for real: messages go through once each, and one bookie can be lost."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import psutil
import pulsar
import pyarrow.compute as pc
import requests
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.history import read_history
from pulsarlab.history.faults import read_faults
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.security import client

runner = CliRunner()


def produce(cluster: LocalCluster, topic: str, n: int, prefix: str) -> list[str]:
    """``n`` messages sent to ``topic``, kept by a durable subscription made first: a topic with none
    is deleted by its broker's inactive-topic sweep after a minute idle (Pulsar's default), and a
    test that restarts nodes before reading them back can take longer than that."""
    c = client(cluster.service_url("smoke"), auth=cluster.client_auth())
    try:
        c.subscribe(topic, "kept").close()
        producer = c.create_producer(topic, block_if_queue_full=True, batching_enabled=True)
        sent = [f"{prefix}-{i}" for i in range(n)]
        for body in sent:
            producer.send_async(body.encode(), None)
        producer.flush()
        producer.close()
        return sent
    finally:
        c.close()


def consume_all(cluster: LocalCluster, topic: str, expected: int, timeout: float = 60) -> list[str]:
    c = client(cluster.service_url("smoke"), auth=cluster.client_auth())
    try:
        consumer = c.subscribe(topic, f"check-{uuid.uuid4().hex[:6]}", initial_position=pulsar.InitialPosition.Earliest)
        got: list[str] = []
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            try:
                msg = consumer.receive(timeout_millis=2000)
            except pulsar.Timeout:
                continue
            got.append(msg.data().decode())
            consumer.acknowledge(msg)
        # nothing more must arrive
        try:
            extra = consumer.receive(timeout_millis=1500)
            got.append(extra.data().decode())
        except pulsar.Timeout:
            pass
        return got
    finally:
        c.close()


def assert_exactly_once(cluster: LocalCluster, topic: str, n: int, prefix: str) -> None:
    """``n`` messages produced to ``topic`` are each consumed exactly once."""
    sent = produce(cluster, topic, n, prefix)
    got = consume_all(cluster, topic, len(sent))
    assert len(got) == n
    assert sorted(got) == sorted(sent)


def test_the_topologys_broker_settings_reach_the_running_broker(smoke: LocalCluster) -> None:
    # the pool's smoke topology sets acknowledgmentAtBatchIndexLevelEnabled: true at its top level
    # (the distribution's default is false): what the broker runs with, read back from it
    assert smoke.topo.config.broker == {"acknowledgmentAtBatchIndexLevelEnabled": True}
    runtime = requests.get(f"{smoke.topo.web_url('smoke')}/admin/v2/brokers/configuration/runtime", timeout=10)
    runtime.raise_for_status()
    assert runtime.json()["acknowledgmentAtBatchIndexLevelEnabled"] == "true"
    # and its jvm_options: on the broker's JVM command line, not on the bookies'
    option = "-Dpulsarlab.test.setting=from-topology"
    assert smoke.topo.jvm_options.broker == [option]

    def command_line(node: str) -> list[str]:  # the node's process and any it started (bin/pulsar execs the JVM)
        proc = psutil.Process(smoke.state.nodes[node].pid)
        return [arg for p in (proc, *proc.children(recursive=True)) for arg in p.cmdline()]

    assert option in command_line("pulsar1")
    assert option not in command_line("bk1")


def test_status_shows_every_node_ready(smoke: LocalCluster) -> None:
    result = runner.invoke(app, ["status", "--json", "--state-dir", str(smoke.state_dir)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["name"] == "smoke" and report["runtime"] == "local"
    assert {n["name"] for n in report["nodes"]} == {"zk", "bk1", "bk2", "bk3", "pulsar1"}
    assert all(n["ready"] and n["pid"] for n in report["nodes"])
    broker = smoke.topo.address_of(smoke.topo.node("pulsar1"))
    assert report["clusters"] == [{"name": "smoke", "service_url": f"pulsar://{broker}:6650", "web_url": f"http://{broker}:8080"}]
    for n in report["nodes"]:
        assert psutil.pid_exists(n["pid"])


def test_thousand_messages_arrive_exactly_once(smoke: LocalCluster) -> None:
    assert_exactly_once(smoke, f"persistent://smoke/test/once-{uuid.uuid4().hex[:8]}", 1000, "m")


def test_up_twice_changes_nothing(smoke: LocalCluster) -> None:
    pids = {name: rec.pid for name, rec in smoke.state.nodes.items()}
    result = runner.invoke(app, ["up", "--topology", str(smoke.state_dir / "topology.yaml"), "--state-dir", str(smoke.state_dir)])
    assert result.exit_code == 0, result.output
    assert "already running" in result.stdout
    again = LocalCluster.open(smoke.state_dir)
    assert {name: rec.pid for name, rec in again.state.nodes.items()} == pids


def test_losing_one_bookie_keeps_producing_and_it_rejoins(smoke: LocalCluster) -> None:
    state = str(smoke.state_dir)
    result = runner.invoke(app, ["node", "kill", "bk1", "--state-dir", state])
    assert result.exit_code == 0, result.output
    smoke.state = LocalCluster.open(smoke.state_dir).state
    assert not smoke.alive("bk1")

    assert_exactly_once(smoke, f"persistent://smoke/test/bookie-loss-{uuid.uuid4().hex[:8]}", 200, "k")  # E=2 of 2 left

    result = runner.invoke(app, ["node", "start", "bk1", "--state-dir", state])
    assert result.exit_code == 0, result.output
    smoke.state = LocalCluster.open(smoke.state_dir).state
    rw = smoke.wait_writable_bookies  # all three registered as writable again
    smoke.topo.cluster("smoke").persistence.ensemble = 3
    try:
        rw("smoke")
    finally:
        smoke.topo.cluster("smoke").persistence.ensemble = 2
    status = json.loads(runner.invoke(app, ["status", "--json", "--state-dir", state]).stdout)
    assert all(n["ready"] for n in status["nodes"])


def test_workload_faults_are_rows_of_its_history(smoke: LocalCluster, tmp_path: Path) -> None:
    """``workload run --fault``: the one scheduler kills a bookie and starts it again while the
    workload produces, counted from its first acknowledged send, and the run's history says what
    happened, to which node, when."""
    run = tmp_path / "run"
    result = runner.invoke(app, ["workload", "run", "--out", str(run), "--duration", "8", "--rate", "200",
                                 "--fault", "2 kill bk2", "--fault", "4 start bk2", "--state-dir", str(smoke.state_dir)])
    assert result.exit_code == 0, result.output
    smoke.state = LocalCluster.open(smoke.state_dir).state  # the pids the command's process recorded
    assert smoke.alive("bk2")
    faults = read_faults(run)
    assert faults is not None and [(f.fault, f.nodes, f.phase, f.outcome) for f in faults] == [
        ("kill bk2", ("bk2",), "applied", "ok"), ("start bk2", ("bk2",), "healed", "ok")], faults
    sends = read_history(run).filter(pc.equal(pc.field("op"), "send"))
    first_ack = pc.min(sends.filter(pc.equal(pc.field("type"), "ok"))["ts"]).as_py()
    last_send = pc.max(sends["ts"]).as_py()
    kill, start = faults
    # 2 s and 4 s after the first acknowledged send, while producing; late by the time the counters take
    # to show that ack (drivers write their journals every 0.5 s, polled every 0.25 s) and scheduling
    assert first_ack + 2e9 <= kill.ts < first_ack + 4e9 and first_ack + 4e9 <= start.ts < last_send, (first_ack, faults)
    assert kill.ended_ts <= start.ts and 1.99 < kill.offset_s < 3 and start.offset_s > 3.99
