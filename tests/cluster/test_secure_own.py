"""``examples/client-ci.yaml`` (a client library's CI broker) brought up as a user would, with the
project's own material made with openssl beside it in ``certs/`` (a CA, the broker's certificate,
a token secret, an htpasswd file): the broker serves that certificate; a token pulsarlab mints with
the project's secret, a client certificate of its CA and a basic user each produce and consume on
the namespace granted to their role, and only there; a wrong password, a certificate of another CA
and no credentials are refused."""

from __future__ import annotations

import json
import os
import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jwt
import pulsar
import pytest
import requests
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from typer.testing import CliRunner

from pulsarlab import ops
from pulsarlab.cli import app
from pulsarlab.deployment import NodeControl
from pulsarlab.security.client import CLIENT_LOG
from pulsarlab.topology import Role, parse
from tests.user_material import UserMaterial, make

pytestmark = pytest.mark.cluster
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "client-ci.yaml"
REFUSED = (pulsar.AuthenticationError, pulsar.AuthorizationError, pulsar.Timeout, pulsar.ConnectError)


@dataclass(frozen=True)
class Own:
    cluster: NodeControl
    mine: UserMaterial
    stranger: UserMaterial  # the same names, signed by another CA

    @property
    def broker(self) -> tuple[str, int]:
        b = self.cluster.topo.nodes_of(Role.BROKER)[0]
        return self.cluster.topo.address_of(b), b.port("web")


@pytest.fixture(scope="module")
def own(cluster_pool, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Own]:
    cluster_pool.close()  # the pool's smoke binds the same addresses
    folder = tmp_path_factory.mktemp("client-ci")
    data = {**yaml.safe_load(EXAMPLE.read_text()), "address_prefix": os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX", "127.0")}
    (folder / "client-ci.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    planned = parse(data)
    ips = [planned.address_of(b) for b in planned.nodes_of(Role.BROKER)]
    mine = make(folder / "certs", ips, ("alice",), {"bob": "s3cret"})  # the names the example expects
    stranger = make(folder / "stranger", ips, ("alice",), ca_name="other")
    _, cluster = ops.up(str(folder / "client-ci.yaml"), state_dir=folder / "state", say=print)
    try:
        yield Own(cluster, mine, stranger)
    finally:
        cluster.down()


def _client(own: Own, timeout: int = 8, **auth: object) -> pulsar.Client:
    return pulsar.Client(own.cluster.service_url("ci"), operation_timeout_seconds=timeout, connection_timeout_ms=5000,
                         tls_trust_certs_file_path=str(own.mine.path("ca.pem")), tls_validate_hostname=True,
                         logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, str(CLIENT_LOG)), **auth)


def _round_trip(c: pulsar.Client, ns: str) -> bytes:
    topic = f"persistent://{ns}/own-{uuid.uuid4().hex[:8]}"
    try:
        consumer = c.subscribe(topic, "s")
        payload = uuid.uuid4().bytes
        c.create_producer(topic).send(payload)
        msg = consumer.receive(timeout_millis=10000)
        consumer.acknowledge(msg)
        return msg.data() if msg.data() == payload else b""
    finally:
        c.close()


def test_the_broker_serves_the_operators_certificate(own: Own) -> None:
    address, port = own.broker
    ctx = ssl.create_default_context(cafile=str(own.mine.path("ca.pem")))  # hostname (its address) checked too
    with socket.create_connection((address, port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=address) as tls:
        served = tls.getpeercert(binary_form=True)
    mine = x509.load_pem_x509_certificate(own.mine.path("broker.pem").read_bytes())
    assert served == mine.public_bytes(serialization.Encoding.DER)


def test_a_token_a_client_certificate_and_a_basic_user_each_produce_and_consume_where_granted(own: Own) -> None:
    minted = CliRunner().invoke(app, ["token", "create", "carol", "--state-dir", str(own.cluster.state_dir)])
    assert minted.exit_code == 0, minted.output
    carol = minted.stdout.strip()
    secret = own.mine.path("secret.key").read_bytes()  # signed with the project's own secret
    assert jwt.decode(carol, secret, algorithms=["HS256"])["sub"] == "carol"
    logins = {
        "ci/tokens": pulsar.AuthenticationToken(carol),
        "ci/certificates": pulsar.AuthenticationTLS(str(own.mine.path("alice.pem")), str(own.mine.path("alice.key"))),
        "ci/passwords": pulsar.AuthenticationBasic("bob", "s3cret"),
    }
    for ns, auth in logins.items():
        assert _round_trip(_client(own, authentication=auth), ns), ns
    # each role only where it was granted: the certificate's role on the passwords' namespace
    c = _client(own, authentication=logins["ci/certificates"])
    with pytest.raises(REFUSED):
        try:
            c.create_producer(f"persistent://ci/passwords/not-alices-{uuid.uuid4().hex[:8]}").send(b"x")
        finally:
            c.close()


@pytest.mark.parametrize("who", ["wrong password", "certificate of another CA", "no credentials"])
def test_a_wrong_password_a_foreign_certificate_or_none_is_refused(own: Own, who: str) -> None:
    auth = {
        "wrong password": {"authentication": pulsar.AuthenticationBasic("bob", "guess")},
        "certificate of another CA": {"authentication": pulsar.AuthenticationTLS(
            str(own.stranger.path("alice.pem")), str(own.stranger.path("alice.key")))},
        "no credentials": {},
    }[who]
    c = _client(own, timeout=4, **auth)  # a refusal is a timeout for some of them: no need to wait long
    with pytest.raises(REFUSED):
        try:
            c.create_producer(f"persistent://ci/tokens/refused-{uuid.uuid4().hex[:8]}").send(b"x")
        finally:
            c.close()


def test_the_operators_files_are_what_the_broker_reads(own: Own) -> None:
    """No generated CA beside the operator's: the folder holds their CA and no CA key."""
    files = own.cluster.state_dir / "security"
    assert (files / "ca.pem").read_bytes() == own.mine.path("ca.pem").read_bytes()
    assert not (files / "ca.key").exists()
    assert (files / "htpasswd").read_bytes() == Path(own.mine.path("htpasswd")).read_bytes()


def test_plain_text_beside_tls_serves_the_same_logins_and_grants(own: Own) -> None:
    """The example's broker serves plain text on 6650/8080 beside TLS on 6651/8443 (Pulsar's own
    layout, as a client suite expects it): `pulsarlab env` names both; a token and a basic user
    each produce and consume over pulsar:// where granted; the plain admin API asks for a login;
    the TLS ports speak TLS only."""
    topo = own.cluster.topo
    b = topo.nodes_of(Role.BROKER)[0]
    address = topo.address_of(b)
    assert {k: b.port(k) for k in ("service", "web", "service_plain", "web_plain")} == {
        "service": 6651, "web": 8443, "service_plain": 6650, "web_plain": 8080}
    shown = CliRunner().invoke(app, ["env", "--format", "json", "--state-dir", str(own.cluster.state_dir)])
    assert shown.exit_code == 0, shown.output
    env = json.loads(shown.stdout)
    assert env["PULSAR_SERVICE_URL"] == f"pulsar+ssl://{address}:6651"
    assert (env["PULSAR_PLAIN_SERVICE_URL"], env["PULSAR_PLAIN_ADMIN_URL"]) == (f"pulsar://{address}:6650", f"http://{address}:8080")

    minted = CliRunner().invoke(app, ["token", "create", "carol", "--state-dir", str(own.cluster.state_dir)])
    assert minted.exit_code == 0, minted.output
    plain = {"operation_timeout_seconds": 8, "connection_timeout_ms": 5000,
             "logger": pulsar.FileLogger(pulsar.LoggerLevel.Error, str(CLIENT_LOG))}
    for ns, auth in {"ci/tokens": pulsar.AuthenticationToken(minted.stdout.strip()),
                     "ci/passwords": pulsar.AuthenticationBasic("bob", "s3cret")}.items():
        assert _round_trip(pulsar.Client(env["PULSAR_PLAIN_SERVICE_URL"], authentication=auth, **plain), ns), ns
    c = pulsar.Client(env["PULSAR_PLAIN_SERVICE_URL"], operation_timeout_seconds=4, connection_timeout_ms=5000,
                      logger=plain["logger"])  # no login: refused over plain text too
    with pytest.raises(REFUSED):
        try:
            c.create_producer(f"persistent://ci/tokens/refused-{uuid.uuid4().hex[:8]}").send(b"x")
        finally:
            c.close()

    tenants = f"{env['PULSAR_PLAIN_ADMIN_URL']}/admin/v2/tenants"
    assert requests.get(tenants, timeout=10).status_code == 401
    admin = own.cluster.client_auth()
    assert admin is not None
    assert "ci" in requests.get(tenants, headers=admin.headers(), timeout=10).json()
    with socket.create_connection((address, b.port("web")), timeout=10) as raw:  # plain text to the TLS port
        raw.sendall(b"GET /admin/v2/tenants HTTP/1.0\r\n\r\n")
        raw.settimeout(10)
        answer = raw.recv(64)
    assert not answer.startswith(b"HTTP/"), answer
