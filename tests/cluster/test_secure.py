"""The secure profile on a real smoke cluster (token authentication, authorization, TLS only):
what works with credentials, and every refusal an operator relies on."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import uuid
from pathlib import Path

import jwt
import pulsar
import pytest
import requests
from typer.testing import CliRunner

from pulsarlab import ops
from pulsarlab.admin import credentials
from pulsarlab.admin.client import admin_of
from pulsarlab.cli import app
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.runtime.state import ClusterState
from pulsarlab.security import ClientAuth, client
from pulsarlab.topology import Role
from pulsarlab.workload.run import WorkloadConfig
from tests.eventually import eventually

pytest_plugins = ["pytester"]

NS = "smoke/test"
REFUSED = (pulsar.AuthenticationError, pulsar.AuthorizationError, pulsar.Timeout, pulsar.ConnectError)


def _topic() -> str:
    return f"persistent://{NS}/secure-{uuid.uuid4().hex[:8]}"


def _ca(cluster: LocalCluster) -> Path:
    auth = cluster.client_auth()
    assert auth is not None and auth.ca_file is not None
    return auth.ca_file


def _broker(cluster: LocalCluster):
    b = cluster.topo.nodes_of(Role.BROKER)[0]
    return b, cluster.topo.address_of(b)


def _produce(cluster: LocalCluster, auth: ClientAuth, topic: str, timeout: int = 5) -> None:
    c = client(cluster.service_url("smoke"), operation_timeout=timeout, auth=auth)
    try:
        c.create_producer(topic).send(b"x")
    finally:
        c.close()


def _token_file(tmp_path: Path, token: str) -> Path:
    path = tmp_path / f"{uuid.uuid4().hex}.token"
    path.write_text(token)
    return path


def test_workload_role_produces_and_consumes_over_tls(secure_smoke: LocalCluster) -> None:
    assert secure_smoke.service_url("smoke").startswith("pulsar+ssl://")
    auth = secure_smoke.client_auth("workload")
    topic = _topic()
    c = client(secure_smoke.service_url("smoke"), auth=auth)
    try:
        consumer = c.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        c.create_producer(topic).send(b"secret-hello")
        msg = consumer.receive(timeout_millis=15000)
        assert msg.data() == b"secret-hello"
        consumer.acknowledge(msg)
    finally:
        c.close()


def test_admin_api_answers_401_without_or_with_a_wrong_token(secure_smoke: LocalCluster) -> None:
    web = secure_smoke.admin_url("smoke")
    ca = str(_ca(secure_smoke))
    good = secure_smoke.client_auth()
    assert requests.get(f"{web}/admin/v2/tenants", headers=good.headers(), verify=ca, timeout=10).status_code == 200
    assert requests.get(f"{web}/admin/v2/tenants", verify=ca, timeout=10).status_code == 401
    forged = jwt.encode({"sub": "admin"}, os.urandom(32), algorithm="HS256")  # right role, wrong key
    r = requests.get(f"{web}/admin/v2/tenants", headers={"Authorization": f"Bearer {forged}"}, verify=ca, timeout=10)
    assert r.status_code == 401


def test_produce_is_refused_without_or_with_a_wrong_token(secure_smoke: LocalCluster, tmp_path: Path) -> None:
    ca = _ca(secure_smoke)
    _produce(secure_smoke, secure_smoke.client_auth("workload"), _topic())  # the control: credentials work
    with pytest.raises(REFUSED):
        _produce(secure_smoke, ClientAuth(None, ca), _topic())
    forged = jwt.encode({"sub": "workload"}, os.urandom(32), algorithm="HS256")
    with pytest.raises(REFUSED):
        _produce(secure_smoke, ClientAuth(_token_file(tmp_path, forged), ca), _topic())


def test_role_without_permission_is_refused_until_granted(secure_smoke: LocalCluster, tmp_path: Path) -> None:
    role = f"alice{uuid.uuid4().hex[:6]}"
    token = credentials.create_token(secure_smoke, role, ttl="1h")
    alice = ClientAuth(_token_file(tmp_path, token), _ca(secure_smoke))
    web = secure_smoke.admin_url("smoke")
    topics = f"{web}/admin/v2/namespaces/{NS}/topics"
    r = requests.get(topics, headers=alice.headers(), verify=alice.verify, timeout=10)
    assert r.status_code in (401, 403) and "Unauthorized" in r.text  # authenticated, not authorized
    topic = _topic()
    with pytest.raises(pulsar.AuthorizationError):
        _produce(secure_smoke, alice, topic)

    result = CliRunner().invoke(app, ["grant", role, NS, "--actions", "produce,consume",
                                      "--state-dir", str(secure_smoke.state_dir)])
    assert result.exit_code == 0, result.output
    _produce(secure_smoke, alice, topic)
    assert requests.get(topics, headers=alice.headers(), verify=alice.verify, timeout=10).status_code == 200


def test_a_grant_of_the_topology_lets_its_role_consume_and_nothing_more(secure_smoke: LocalCluster, tmp_path: Path) -> None:
    """The topology's namespace grants the role 'auditor' consume only (conftest's secure_smoke):
    configure applied it, and the role reads there but may not produce."""
    assert admin_of(secure_smoke, "smoke").permissions(NS)["auditor"] == ["consume"]
    auditor = ClientAuth(_token_file(tmp_path, credentials.create_token(secure_smoke, "auditor", ttl="1h")), _ca(secure_smoke))
    topic = _topic()
    _produce(secure_smoke, secure_smoke.client_auth("workload"), topic)
    c = client(secure_smoke.service_url("smoke"), auth=auditor)
    try:
        consumer = c.subscribe(topic, "audit", initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=15000).data() == b"x"
    finally:
        c.close()
    with pytest.raises(pulsar.AuthorizationError):
        _produce(secure_smoke, auditor, _topic())
    report = ops.configure(secure_smoke.state_dir, dry_run=True)  # read back like every other object
    assert report.changes == [], report.changes


def test_plain_text_to_the_tls_ports_fails(secure_smoke: LocalCluster) -> None:
    b, addr = _broker(secure_smoke)
    with pytest.raises(requests.RequestException):
        requests.get(f"http://{addr}:{b.port('web')}/admin/v2/brokers/ready",
                     headers=secure_smoke.client_auth().headers(), timeout=10)
    plain = pulsar.Client(f"pulsar://{addr}:{b.port('service')}", operation_timeout_seconds=5,
                          connection_timeout_ms=3000, authentication=pulsar.AuthenticationToken(
                              secure_smoke.client_auth().token()),
                          logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        with pytest.raises(REFUSED):
            plain.create_producer(_topic())
    finally:
        plain.close()


def test_certificate_hostname_is_checked(secure_smoke: LocalCluster) -> None:
    b, addr = _broker(secure_smoke)
    ctx = ssl.create_default_context(cafile=str(_ca(secure_smoke)))
    assert ctx.check_hostname

    def handshake(name: str) -> None:
        with socket.create_connection((addr, b.port("web")), timeout=10) as raw, \
                ctx.wrap_socket(raw, server_hostname=name) as tls:
            assert tls.version()

    handshake(addr)  # the broker's certificate names its own address
    other = addr.rsplit(".", 1)[0] + ".250"  # a loopback address the certificate does not name
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch|match"):
        handshake(other)


def test_env_points_pulsar_admin_at_the_secure_cluster(secure_smoke: LocalCluster, tmp_path: Path) -> None:
    env = ops.env(secure_smoke.state_dir)
    v = env.variables
    token = secure_smoke.client_auth().token()
    assert v["PULSAR_AUTH_TOKEN_FILE"].endswith("admin.token") and Path(v["PULSAR_TLS_TRUST_CERTS_FILE"]).is_file()
    assert token not in "\n".join(v.values()) and token not in env.client_conf.read_text()
    admin = secure_smoke.distribution().home / "bin" / "pulsar-admin"
    run_env = {**os.environ, **v}
    if secure_smoke.distribution().java.home:
        run_env["JAVA_HOME"] = str(secure_smoke.distribution().java.home)
    r = subprocess.run([str(admin), "namespaces", "list", "smoke"], env=run_env, capture_output=True, text=True,
                       timeout=300)  # a JVM start on a loaded machine
    assert r.returncode == 0, r.stdout + r.stderr
    assert NS in r.stdout


def test_workload_with_the_java_driver_and_configure_are_clean(secure_smoke: LocalCluster, tmp_path: Path) -> None:
    cfg = WorkloadConfig(topic="", duration=3.0, rate=100, producers=1, consumers=1)
    result = ops.workload_run(secure_smoke.state_dir, cfg, tmp_path / "run")
    assert not result.errors and not result.failed, result.errors
    c = result.counters
    assert c.acked >= 100 and c.received >= c.acked and c.stored >= c.acked
    report = ops.configure(secure_smoke.state_dir)  # permissions and TLS URLs read back as the topology wants
    assert report.changes == []
    placement = ops.inspect_placement(secure_smoke.state_dir, cfg.topic)
    assert placement.topics


def test_chaos_unload_runs_with_the_admin_credentials(secure_smoke: LocalCluster) -> None:
    """The ``unload`` fault on the TLS + token cluster: the broker closes the topic's ledger and the
    topic is loaded again on a new one (the fault's call used to have neither the cluster's CA nor a token)."""
    topic = _topic()
    _produce(secure_smoke, secure_smoke.client_auth("workload"), topic)
    admin = admin_of(secure_smoke, "smoke")
    before = [led.ledger_id for led in admin.ledgers(topic)]
    assert before, f"{topic} has no ledger after a send"

    done = ops.chaos_action(secure_smoke.state_dir, "unload", [topic])  # a scenario step's `unload TOPIC`, run now
    assert done.startswith(f"unloaded {topic}")

    def reloaded_on_a_new_ledger() -> list[int]:
        after = [led.ledger_id for led in admin.ledgers(topic)]  # the stats call loads the topic again
        assert max(after) > max(before) and set(before) <= set(after), (before, after)
        return after

    eventually(reloaded_on_a_new_ledger, timeout=60, interval=1, what=f"{topic} loaded again on a new ledger")


SECURE_USER_TEST = '''
import requests


def test_users_test_talks_to_the_secure_cluster(pulsar_cluster):
    assert pulsar_cluster.service_url.startswith("pulsar+ssl://") and pulsar_cluster.admin_url.startswith("https://")
    client = pulsar_cluster.client()
    topic = pulsar_cluster.topic("plugin-secure")
    consumer = client.subscribe(topic, "check")
    client.create_producer(topic).send(b"over tls, with a token")
    assert consumer.receive(timeout_millis=30000).data() == b"over tls, with a token"
    auth = pulsar_cluster.auth
    tenants = pulsar_cluster.admin_url + "/admin/v2/tenants"
    assert requests.get(tenants, headers=auth.headers(), verify=auth.verify, timeout=10).status_code == 200
    assert requests.get(tenants, verify=auth.verify, timeout=10).status_code == 401
'''


def test_pytest_plugin_secure_option_gives_users_tests_a_client_with_credentials(
    secure_smoke: LocalCluster, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--pulsarlab-secure``: a user's test reaches the secure cluster (joined, not restarted) with
    the token and CA the plugin hands it, and the cluster is left running for its owner."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))
    def pids() -> dict[str, int]:
        return {n: r.pid for n, r in ClusterState.load(secure_smoke.state_dir).nodes.items()}

    before = pids()
    pytester.makepyfile(test_user=SECURE_USER_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "pulsarlab.pytest_plugin", "--pulsarlab-secure", "--pulsarlab-topology",
        str(secure_smoke.state_dir / "topology.yaml"), "--pulsarlab-state-dir", str(secure_smoke.state_dir), timeout=300)
    result.assert_outcomes(passed=1)
    assert pids() == before and all(secure_smoke.alive(n) for n in before)


def test_monitoring_scrapes_the_tls_only_broker_against_the_cluster_ca(secure_smoke: LocalCluster) -> None:
    sd = str(secure_smoke.state_dir)
    r = CliRunner().invoke(app, ["monitoring", "up", "--state-dir", sd, "--json"])
    try:
        assert r.exit_code == 0, r.output
        targets = {t["node"]: t for t in json.loads(r.stdout)["targets"]}
        assert {n: t["health"] for n, t in targets.items()} == {n.name: "up" for n in secure_smoke.topo.nodes}
        assert targets["pulsar1"]["scrape_url"].startswith("https://")
    finally:
        assert CliRunner().invoke(app, ["monitoring", "down", "--state-dir", sd]).exit_code == 0
