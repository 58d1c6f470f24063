"""The user's own security material (issue 31, item 3), made with openssl as an operator makes it:
a topology names the files (relative to itself), ``up`` checks them all before writing anything and
puts them where every target reads them; several authentication methods render into the broker;
each wrong file is named with what is wrong, all at once."""

from __future__ import annotations

import shutil
from pathlib import Path

import jwt
import pytest
import yaml

from pulsarlab.errors import TopologyError, UsageError
from pulsarlab.render import parse_properties, render
from pulsarlab.security import material
from pulsarlab.topology import BUILTIN_DIR, Role, Topology, load
from tests.user_material import UserMaterial, make

SMOKE_BROKER_IP = "127.0.1.5"


@pytest.fixture(scope="module")
def mine(tmp_path_factory: pytest.TempPathFactory) -> UserMaterial:
    return make(tmp_path_factory.mktemp("mine"), [SMOKE_BROKER_IP], ("alice",), {"bob": "s3cret"})


def topology_file(folder: Path, security: dict) -> Path:
    data = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    path = folder / "my-smoke.yaml"
    path.write_text(yaml.safe_dump({**data, "security": security}))
    return path


def own(mine: UserMaterial, folder: Path, **changes: object) -> Topology:
    security = {**mine.security, "authentication": ["token", "tls", "basic"], **changes}
    return load(str(topology_file(folder, {k: v for k, v in security.items() if v is not None})))


def test_own_files_are_put_where_every_target_reads_them_and_a_second_up_keeps_them(mine: UserMaterial, tmp_path: Path) -> None:
    topo = own(mine, tmp_path)
    files = material.ensure(topo, tmp_path / "state")
    assert files is not None
    assert files.ca_cert.read_bytes() == mine.path("ca.pem").read_bytes() and not files.ca_key.exists()
    broker = topo.nodes_of(Role.BROKER)[0].name
    assert files.node_cert(broker).read_bytes() == mine.path("broker.pem").read_bytes()
    assert files.htpasswd.read_bytes() == mine.path("htpasswd").read_bytes()
    # tokens are signed with the user's secret: what the brokers check them with
    secret = mine.path("secret.key").read_bytes()
    assert files.secret_key.read_bytes() == secret
    assert jwt.decode(files.token("admin").read_text(), secret, algorithms=["HS256"])["sub"] == "admin"
    stamps = {p: p.stat().st_mtime_ns for p in files.root.rglob("*") if p.is_file()}
    material.ensure(topo, tmp_path / "state")
    assert {p: p.stat().st_mtime_ns for p in files.root.rglob("*") if p.is_file()} == stamps  # nothing rewritten

    render(topo, tmp_path / "state")  # the nodes' files beside the security folder, as up writes them
    conf = parse_properties((tmp_path / "state" / "nodes" / broker / "conf" / "broker.conf").read_text())
    assert conf["authenticationProviders"].split(",") == [
        f"org.apache.pulsar.broker.authentication.AuthenticationProvider{p}" for p in ("Token", "Tls", "Basic")]
    assert conf["basicAuthConf"] == f"file://{files.htpasswd}"
    assert conf["tlsTrustCertsFilePath"] == str(files.ca_cert)


def test_a_new_signing_key_mints_the_tokens_again(mine: UserMaterial, tmp_path: Path) -> None:
    files = material.ensure(own(mine, tmp_path), tmp_path / "state")
    assert files is not None
    other = tmp_path / "other.key"
    other.write_bytes(bytes(range(32)))
    material.ensure(own(mine, tmp_path, token_key_file=str(other)), tmp_path / "state")
    assert jwt.decode(files.token("admin").read_text(), bytes(range(32)), algorithms=["HS256"])["sub"] == "admin"


def test_relative_paths_are_read_beside_the_topology_file(mine: UserMaterial, tmp_path: Path) -> None:
    for name in ("ca.pem", "broker.pem", "broker.key", "secret.key", "htpasswd"):
        shutil.copy(mine.path(name), tmp_path / name)
    security = {k: Path(v).name for k, v in mine.security.items()}
    topo = load(str(topology_file(tmp_path, {**security, "authentication": ["token", "basic"]})))
    assert topo.security is not None and topo.security.ca_file == str(tmp_path / "ca.pem")


def test_every_problem_of_the_files_is_named_at_once_and_nothing_is_written(mine: UserMaterial, tmp_path: Path) -> None:
    stranger = make(tmp_path / "stranger", ["127.9.9.9"], ca_name="other")  # another CA, another address
    short = tmp_path / "short.key"
    short.write_bytes(b"0123456789")
    bad_users = tmp_path / "htpasswd"
    bad_users.write_text("bob:$2y$05$bcryptisnotreadbypulsar0000000000000000000000000000\n")
    topo = own(mine, tmp_path, cert_file=str(stranger.path("broker.pem")), token_key_file=str(short),
               htpasswd_file=str(bad_users))
    with pytest.raises(UsageError) as err:
        material.ensure(topo, tmp_path / "state")
    said = str(err.value)
    assert f"security.key_file {mine.path('broker.key')}: not the key of {stranger.path('broker.pem')}" in said
    assert f"security.cert_file {stranger.path('broker.pem')}: not signed by {mine.path('ca.pem')}" in said
    assert f"no IP name for broker(s) pulsar1 ({SMOKE_BROKER_IP})" in said and "it names 127.9.9.9" in said
    assert f"security.token_key_file {short}: 10 bytes; an HS256 secret needs at least 32" in said
    assert f"security.htpasswd_file {bad_users}:1: not user:hash with an apr1" in said
    assert not (tmp_path / "state").exists()


def test_an_encrypted_key_or_a_file_that_is_not_pem_is_named(mine: UserMaterial, tmp_path: Path) -> None:
    from tests.user_material import _openssl

    _openssl(mine.folder, "pkey", "-in", "broker.key", "-aes256", "-passout", "pass:x", "-out", str(tmp_path / "enc.key"))
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    topo = own(mine, tmp_path, key_file=str(tmp_path / "enc.key"), ca_file=str(tmp_path / "garbage.pem"))
    with pytest.raises(UsageError) as err:
        material.ensure(topo, tmp_path / "state")
    assert "encrypted; the brokers read an unencrypted PEM key" in str(err.value)
    assert f"security.ca_file {tmp_path / 'garbage.pem'}: not a PEM certificate" in str(err.value)


def test_rsa_tokens_take_the_users_private_key(tmp_path: Path) -> None:
    from tests.user_material import _openssl

    _openssl(tmp_path, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "signing.pem")
    topo = load(str(topology_file(tmp_path, {"token": "rsa", "tls": False, "token_key_file": "signing.pem"})))
    files = material.ensure(topo, tmp_path / "state")
    assert files is not None and files.public_key.is_file()
    from cryptography.hazmat.primitives import serialization

    public = serialization.load_der_public_key(files.public_key.read_bytes())
    assert jwt.decode(files.token("workload").read_text(), public, algorithms=["RS256"])["sub"] == "workload"  # type: ignore[arg-type]


@pytest.mark.parametrize(("security", "field", "says"), [
    ({"authentication": ["tls", "basic"]}, "security.authentication", "must include token"),
    ({"authentication": ["token", "token"]}, "security.authentication", "token named twice"),
    ({"tls": False, "authentication": ["token", "tls"]}, "security.authentication", "needs tls: true"),
    ({"authentication": ["token", "basic"]}, "security.htpasswd_file", "go together"),
    ({"ca_file": "ca.pem"}, "security.ca_file", "name all three or none"),
    ({"token_key_file": "nothing-here.key"}, "security.token_key_file", "is not a readable file"),
    ({"tls": False, "plain_text": True}, "security.plain_text", "needs tls: true"),
])
def test_a_bad_security_section_is_refused_naming_the_field(tmp_path: Path, security: dict, field: str, says: str) -> None:
    (tmp_path / "ca.pem").write_text("x")
    with pytest.raises(TopologyError) as err:
        load(str(topology_file(tmp_path, security)))
    assert err.value.field == field and says in str(err.value), str(err.value)


def test_validate_and_render_name_a_bad_file_before_anything_is_written(mine: UserMaterial, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pulsarlab.cli import app

    stranger = make(tmp_path / "stranger", [SMOKE_BROKER_IP], ca_name="other")
    path = topology_file(tmp_path, {**mine.security, "cert_file": str(stranger.path("broker.pem")),
                                    "authentication": ["token", "basic"]})
    for args in (["validate", str(path)], ["render", "--topology", str(path), "--out", str(tmp_path / "out")]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"security.cert_file {stranger.path('broker.pem')}: not signed by {mine.path('ca.pem')}" in result.output
    assert not (tmp_path / "out").exists()


def test_plain_text_beside_tls_takes_pulsars_own_ports_and_renders_both(tmp_path: Path) -> None:
    """``plain_text: true``: the broker's TLS ports default to 6651/8443, its plain-text ones to
    6650/8080; a node may move any of them; both pairs reach broker.conf, the web pool grows for
    the second connector; the ports are checked like any other."""
    topo = load(str(topology_file(tmp_path, {"plain_text": True})))
    broker = topo.nodes_of(Role.BROKER)[0]
    assert {k: broker.port(k) for k in topo.port_kinds(broker)} == {
        "service": 6651, "web": 8443, "service_plain": 6650, "web_plain": 8080}
    assert (topo.service_url("smoke"), topo.plain_service_url("smoke")) == (
        f"pulsar+ssl://{SMOKE_BROKER_IP}:6651", f"pulsar://{SMOKE_BROKER_IP}:6650")
    assert (topo.web_url("smoke"), topo.plain_web_url("smoke")) == (
        f"https://{SMOKE_BROKER_IP}:8443", f"http://{SMOKE_BROKER_IP}:8080")
    render(topo, tmp_path / "out")
    conf = parse_properties((tmp_path / "out" / "nodes" / broker.name / "conf" / "broker.conf").read_text())
    assert {k: conf[k] for k in ("brokerServicePort", "webServicePort", "brokerServicePortTls", "webServicePortTls")} == {
        "brokerServicePort": "6650", "webServicePort": "8080", "brokerServicePortTls": "6651", "webServicePortTls": "8443"}
    assert int(conf["numHttpServerThreads"]) > 4

    tls_only = load(str(topology_file(tmp_path, {})))
    assert tls_only.plain_service_url("smoke") is None
    assert tls_only.port_kinds(tls_only.nodes_of(Role.BROKER)[0]) == ["service", "web"]

    data = yaml.safe_load(topology_file(tmp_path, {"plain_text": True}).read_text())
    for ports, says in (({"web_plain": 6651}, "clashes with another of its own ports"),
                        ({"service_plain": 0}, "out of range")):
        data["nodes"] = [{**n, "ports": ports} if n["role"] == "broker" else n for n in data["nodes"]]
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
        with pytest.raises(TopologyError) as err:
            load(str(tmp_path / "bad.yaml"))
        assert says in str(err.value), str(err.value)
    data["security"] = {}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(TopologyError) as err:  # plain-text ports without plain_text
        load(str(tmp_path / "bad.yaml"))
    assert "service_plain and web_plain with security.plain_text" in str(err.value), str(err.value)
