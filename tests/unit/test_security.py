"""The secure profile without a cluster: validation of ``security:``, the material pulsarlab
generates (formats, modes, SANs, reuse), the rendered broker configuration, ``env`` and the CLI."""

from __future__ import annotations

import datetime as dt
import ipaddress
import stat
from pathlib import Path
from types import SimpleNamespace

import jwt
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from typer.testing import CliRunner

from pulsarlab.admin import credentials
from pulsarlab.admin.reconcile import desired_state
from pulsarlab.cli import app
from pulsarlab.errors import TopologyError, UsageError
from pulsarlab.ops import load_topology
from pulsarlab.render import parse_properties, render
from pulsarlab.runtime.docker.compose import render_compose
from pulsarlab.security import ClientAuth, material
from pulsarlab.security import files as security_files
from pulsarlab.topology import BUILTIN_DIR, Role, Security, Topology, load, parse


def secure(name: str, **security) -> Topology:
    data = yaml.safe_load((BUILTIN_DIR / f"{name}.yaml").read_text())
    data["security"] = security
    return parse(data)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# ----- validation ----------------------------------------------------------------------------------
def test_security_section_defaults_and_up_secure() -> None:
    t = secure("smoke")
    assert t.security == Security() and t.tls
    assert t.service_url("smoke") == "pulsar+ssl://127.0.1.5:6650"
    assert t.web_url("smoke") == "https://127.0.1.5:8080"
    assert load("smoke").service_url("smoke").startswith("pulsar://")
    assert load_topology("smoke", secure=True).security == Security()
    assert load_topology("smoke").security is None
    plain_tls = secure("smoke", tls=False)
    assert plain_tls.service_url("smoke").startswith("pulsar://") and plain_tls.security.token == "symmetric"


@pytest.mark.parametrize("security, field", [
    ({"token": "hmac"}, "security.token"),
    ({"superusers": ["admin"]}, "security.superusers"),  # the broker role must be a superuser
    ({"superusers": ["broker"]}, "security.superusers"),  # and so must the admin role
    ({"workload_role": "admin"}, "security.workload_role"),
    ({"admin_role": "bad role"}, "security.admin_role"),
    ({"superusers": ["admin", "broker", "a,b"]}, "security.superusers[2]"),
    ({"tls": "maybe"}, "security.tls"),
])
def test_bad_security_is_refused_naming_the_field(security: dict, field: str) -> None:
    with pytest.raises(TopologyError) as exc:
        secure("smoke", **security)
    assert exc.value.field == field


def _granted(grants: dict, security: dict | None) -> dict:
    data = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    data["namespaces"][0]["grants"] = grants
    if security is not None:
        data["security"] = security
    return data


def test_namespace_grants_join_the_workload_roles_permissions(tmp_path: Path) -> None:
    topo = parse(_granted({"auditor": ["consume"], "workload": ["functions"]}, {}))
    ns = topo.namespaces[0].name
    [perm] = [i for i in desired_state(topo, "smoke") if i.kind == "permission" and i.name == ns]
    assert perm.wanted == {"workload": ["consume", "functions", "produce"], "auditor": ["consume"]}
    others = [i.wanted for i in desired_state(topo, "smoke") if i.kind == "permission" and i.name != ns]
    assert all(w == {"workload": ["consume", "produce"]} for w in others)


@pytest.mark.parametrize("grants, field, says", [
    ({"bad role": ["consume"]}, "grants", "role 'bad role' is not a name"),
    ({"auditor": ["read"]}, "grants.auditor", "distinct actions among produce, consume"),
    ({"auditor": []}, "grants.auditor", "distinct actions"),
    ({"auditor": ["consume", "consume"]}, "grants.auditor", "distinct actions"),
])
def test_a_bad_grant_is_refused_naming_the_field(grants: dict, field: str, says: str) -> None:
    with pytest.raises(TopologyError) as exc:
        parse(_granted(grants, {}))
    assert exc.value.field.endswith(field) and says in str(exc.value), (exc.value.field, str(exc.value))


def test_grants_on_an_open_topology_are_refused_unless_up_is_secure(tmp_path: Path) -> None:
    path = tmp_path / "granted.yaml"
    path.write_text(yaml.safe_dump(_granted({"auditor": ["consume"]}, None)))
    with pytest.raises(UsageError, match="only a secure cluster enforces: add a 'security:' section, or run with --secure"):
        load_topology(str(path))
    assert load_topology(str(path), secure=True).namespaces[0].grants == {"auditor": ["consume"]}


# ----- material ------------------------------------------------------------------------------------
def test_symmetric_material_modes_tokens_and_reuse(tmp_path: Path) -> None:
    topo = secure("geo")
    files = material.ensure(topo, tmp_path)
    assert files is not None
    every = [p for p in files.root.rglob("*") if p.is_file()]
    assert every and all(mode(p) == 0o600 for p in every), {str(p): oct(mode(p)) for p in every}
    assert all(mode(d) == 0o700 for d in [files.root, *(p for p in files.root.rglob("*") if p.is_dir())])
    key = files.secret_key.read_bytes()
    assert len(key) == 32  # raw bytes, what tokenSecretKey=file:// reads
    for role in ("admin", "broker", "workload"):
        claims = jwt.decode(files.token(role).read_text(), key, algorithms=["HS256"])
        assert claims == {"sub": role}
    before = {p: p.read_bytes() for p in every}
    material.ensure(topo, tmp_path)  # re-running up keeps everything
    assert {p: p.read_bytes() for p in every} == before


def test_broker_certificates_name_their_address_and_chain_to_the_ca(tmp_path: Path) -> None:
    topo = secure("geo")
    files = material.ensure(topo, tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    brokers = topo.nodes_of(Role.BROKER)
    assert sorted(p.name for p in (files.root / "nodes").iterdir()) == sorted(b.name for b in brokers)
    for b in brokers:
        cert = x509.load_pem_x509_certificate(files.node_cert(b.name).read_bytes())
        cert.verify_directly_issued_by(ca)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(san.get_values_for_type(x509.IPAddress)) == {
            ipaddress.ip_address(topo.address_of(b)), ipaddress.ip_address("127.0.0.1")}
        assert san.get_values_for_type(x509.DNSName) == ["localhost"]
        key = serialization.load_pem_private_key(files.node_key(b.name).read_bytes(), None)
        assert b"BEGIN PRIVATE KEY" in files.node_key(b.name).read_bytes()  # PKCS#8, as the broker wants
        assert key.public_key().public_numbers() == cert.public_key().public_numbers()


def test_a_moved_broker_gets_a_new_certificate_the_others_are_kept(tmp_path: Path) -> None:
    topo = secure("smoke")
    files = material.ensure(topo, tmp_path)
    old = files.node_cert("pulsar1").read_bytes()
    ca = files.ca_cert.read_bytes()
    topo.node("pulsar1").address = "127.0.9.9"
    material.ensure(topo, tmp_path)
    assert files.node_cert("pulsar1").read_bytes() != old
    assert material.cert_addresses(files.node_cert("pulsar1")) == {"127.0.9.9", "127.0.0.1"}
    assert files.ca_cert.read_bytes() == ca


def test_rsa_material_is_der_and_tokens_verify_with_the_public_key(tmp_path: Path) -> None:
    topo = secure("smoke", token="rsa", tls=False)
    files = material.ensure(topo, tmp_path)
    assert not files.secret_key.exists() and not files.ca_cert.exists()  # no TLS: no CA
    public = serialization.load_der_public_key(files.public_key.read_bytes())  # DER SubjectPublicKeyInfo
    serialization.load_der_private_key(files.private_key.read_bytes(), None)
    assert jwt.decode(files.token("admin").read_text(), public, algorithms=["RS256"])["sub"] == "admin"
    assert mode(files.private_key) == 0o600


def test_minted_token_expiry_and_bad_role(tmp_path: Path) -> None:
    topo = secure("smoke")
    files = material.ensure(topo, tmp_path)
    token = material.mint(files, topo.security, "alice", dt.timedelta(hours=2))
    claims = jwt.decode(token, files.secret_key.read_bytes(), algorithms=["HS256"])
    assert claims["sub"] == "alice"
    assert 7100 < claims["exp"] - dt.datetime.now(dt.UTC).timestamp() <= 7200
    with pytest.raises(UsageError):
        material.mint(files, topo.security, "al ice")


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("15m", 900), ("2h", 7200), ("7d", 604800)])
def test_ttl(text: str, seconds: int) -> None:
    assert credentials.parse_ttl(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["0h", "2w", "-1h", "h", ""])
def test_bad_ttl(text: str) -> None:
    with pytest.raises(UsageError):
        credentials.parse_ttl(text)


def test_actions() -> None:
    assert credentials.parse_actions("produce, consume") == ["consume", "produce"]
    for bad in ("", "produce,admin"):
        with pytest.raises(UsageError):
            credentials.parse_actions(bad)


# ----- rendering -----------------------------------------------------------------------------------
def test_secure_broker_conf_is_tls_only_with_token_auth(tmp_path: Path) -> None:
    topo = secure("geo")
    render(topo, tmp_path)
    b = parse_properties((tmp_path / "nodes" / "pulsar1-eu" / "conf" / "broker.conf").read_text())
    sec = tmp_path.resolve() / "security"
    assert b["brokerServicePort"] == "" and b["webServicePort"] == ""
    assert (b["brokerServicePortTls"], b["webServicePortTls"]) == ("6650", "8080")
    assert b["tlsCertificateFilePath"] == str(sec / "nodes" / "pulsar1-eu" / "cert.pem")
    assert b["tlsKeyFilePath"] == str(sec / "nodes" / "pulsar1-eu" / "key.pem")
    assert b["tlsTrustCertsFilePath"] == b["brokerClientTrustCertsFilePath"] == str(sec / "ca.pem")
    assert b["brokerClientTlsEnabled"] == "true"
    assert b["authenticationEnabled"] == b["authorizationEnabled"] == "true"
    assert b["authenticationProviders"].endswith("AuthenticationProviderToken")
    assert b["tokenSecretKey"] == f"file://{sec / 'secret.key'}" and "tokenPublicKey" not in b
    assert b["superUserRoles"] == "admin,broker" and b["anonymousUserRole"] == ""
    assert b["brokerClientAuthenticationPlugin"].endswith("AuthenticationToken")
    assert b["brokerClientAuthenticationParameters"] == f"file://{sec / 'tokens' / 'broker.token'}"


def test_rsa_without_tls_renders_public_key_and_plain_ports(tmp_path: Path) -> None:
    render(secure("smoke", token="rsa", tls=False), tmp_path)
    b = parse_properties((tmp_path / "nodes" / "pulsar1" / "conf" / "broker.conf").read_text())
    assert b["tokenPublicKey"].endswith("/security/public.der") and "tokenSecretKey" not in b
    assert b["brokerServicePort"] == "6650" and "brokerServicePortTls" not in b


def test_open_broker_conf_has_no_security(tmp_path: Path) -> None:
    render(load("smoke"), tmp_path)
    b = parse_properties((tmp_path / "nodes" / "pulsar1" / "conf" / "broker.conf").read_text())
    assert not {"authenticationEnabled", "brokerServicePortTls", "tokenSecretKey"} & set(b)


def test_docker_mounts_the_material_into_brokers_only(tmp_path: Path) -> None:
    render_compose(secure("smoke"), tmp_path, "img:1")
    compose = yaml.safe_load((tmp_path / "compose.yaml").read_text())
    mounts = {name: [v["target"] for v in s["volumes"]] for name, s in compose["services"].items()}
    assert "/pulsarlab-security" in mounts["pulsar1"]
    assert "/pulsarlab-security" not in mounts["bk1"] and "/pulsarlab-security" not in mounts["zk"]
    b = parse_properties((tmp_path / "nodes" / "pulsar1" / "conf" / "broker.conf").read_text())
    assert b["tlsCertificateFilePath"] == "/pulsarlab-security/nodes/pulsar1/cert.pem"
    assert b["tokenSecretKey"] == "file:///pulsarlab-security/secret.key"


def test_geo_registration_carries_tls_urls_and_workload_grants() -> None:
    topo = secure("geo")
    items = desired_state(topo, "cluster-eu")
    us = next(i for i in items if i.kind == "cluster" and i.name == "cluster-us").desired
    assert us["serviceUrlTls"] == us["serviceUrl"] == "https://127.0.2.3:8080,127.0.2.4:8080"
    assert us["brokerServiceUrlTls"] == us["brokerServiceUrl"] == "pulsar+ssl://127.0.2.3:6650,127.0.2.4:6650"
    grants = [i for i in items if i.kind == "permission"]
    assert [(i.name, i.desired) for i in grants] == [("world/global", {"workload": ["consume", "produce"]})]
    assert not [i for i in desired_state(load("geo"), "cluster-eu") if i.kind == "permission"]


# ----- env and the CLI ----------------------------------------------------------------------------
def _fake(topo: Topology, state_dir: Path) -> SimpleNamespace:
    files = material.ensure(topo, state_dir)
    return SimpleNamespace(
        topo=topo, state_dir=state_dir,
        admin_url=lambda name: topo.web_url(name).split(",")[0],
        client_auth=lambda role=None: security_files.client_auth(topo, state_dir, role), files=files,
    )


def test_env_names_the_token_file_and_ca_never_the_token(tmp_path: Path) -> None:
    from pulsarlab.urls import cluster_env

    topo = secure("smoke")
    fake = _fake(topo, tmp_path)
    env = cluster_env(fake)
    token = fake.files.token("admin").read_text()
    assert env.variables["PULSAR_AUTH_TOKEN_FILE"] == str(fake.files.token("admin"))
    assert env.variables["PULSAR_TLS_TRUST_CERTS_FILE"] == str(fake.files.ca_cert)
    assert token not in "".join(env.variables.values())
    conf = parse_properties(env.client_conf.read_text())
    assert token not in env.client_conf.read_text()
    assert conf["authParams"] == f"file://{fake.files.token('admin')}"
    assert conf["authPlugin"] == "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    assert conf["tlsTrustCertsFilePath"] == str(fake.files.ca_cert)
    assert conf["webServiceUrl"].startswith("https://") and conf["brokerServiceUrl"].startswith("pulsar+ssl://")


def test_token_create_prints_only_the_token_or_writes_it_0600(tmp_path: Path, monkeypatch) -> None:
    topo = secure("smoke")
    fake = _fake(topo, tmp_path)
    monkeypatch.setattr("pulsarlab.ops.open_cluster", lambda state_dir, say=None: fake)
    r = CliRunner().invoke(app, ["token", "create", "alice", "--ttl", "1h"])
    assert r.exit_code == 0, r.output
    assert jwt.decode(r.stdout.strip(), fake.files.secret_key.read_bytes(), algorithms=["HS256"])["sub"] == "alice"
    assert r.stdout.count("\n") == 1
    out = tmp_path / "alice.token"
    r = CliRunner().invoke(app, ["token", "create", "alice", "--out", str(out)])
    assert r.exit_code == 0 and out.read_text().strip() not in r.output
    assert mode(out) == 0o600
    r = CliRunner().invoke(app, ["token", "create", "alice", "--ttl", "soon"])
    assert r.exit_code == 2 and "--ttl" in r.output


def test_token_create_on_an_open_cluster_is_one_clear_error(tmp_path: Path, monkeypatch) -> None:
    fake = SimpleNamespace(topo=load("smoke"), state_dir=tmp_path)
    monkeypatch.setattr("pulsarlab.ops.open_cluster", lambda state_dir, say=None: fake)
    r = CliRunner().invoke(app, ["token", "create", "alice"])
    assert r.exit_code == 1 and "not secure" in r.output and "Traceback" not in r.output


def test_admin_client_sends_the_token_and_verifies_with_the_ca_despite_requests_ca_bundle(
        tmp_path: Path, monkeypatch) -> None:
    from pulsarlab.admin.client import AdminClient

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")  # would win over session.verify
    token, ca = tmp_path / "t.token", tmp_path / "ca.pem"
    token.write_text("abc.def.ghi\n")
    seen: dict = {}

    def fake(method, url, **kw):
        seen.update(kw, headers={**admin.session.headers, **kw["headers"]})
        return SimpleNamespace(status_code=200, headers={}, ok=True, url=url, content=b"", text="")

    admin = AdminClient("https://127.0.1.5:8080", auth=ClientAuth(token, ca))
    monkeypatch.setattr(admin.session, "request", fake)
    admin.request("GET", "/admin/v2/tenants")
    assert seen["verify"] == str(ca) and seen["headers"]["Authorization"] == "Bearer abc.def.ghi"


def test_render_secure_from_the_cli(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["render", "--topology", "geo", "--out", str(tmp_path), "--secure"])
    assert r.exit_code == 0, r.output
    b = parse_properties((tmp_path / "nodes" / "pulsar2-us" / "conf" / "broker.conf").read_text())
    assert b["authenticationEnabled"] == "true" and b["brokerServicePortTls"] == "6650"
    assert yaml.safe_load((tmp_path / "topology.yaml").read_text())["security"]["tls"] is True
