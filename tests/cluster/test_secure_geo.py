"""The secure profile on a real geo pair: TLS registrations, a workload produced on one cluster
and consumed on the other as the workload role, replicated over TLS with the brokers' own token,
and clients that fail over between the clusters over TLS with their token."""

from __future__ import annotations

import json
from pathlib import Path

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from typer.testing import CliRunner

from pulsarlab import ops
from pulsarlab.admin import replication
from pulsarlab.admin.client import admin_of
from pulsarlab.cli import app
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.security.files import files_of
from pulsarlab.topology import Role
from pulsarlab.workload.run import WorkloadConfig
from tests.scenario_files import scaled_builtin

EU, US = "cluster-eu", "cluster-us"


def test_secure_geo_is_registered_with_tls_urls_only(secure_geo: LocalCluster) -> None:
    topo = secure_geo.topo
    admin = admin_of(secure_geo, EU)
    for c in (EU, US):
        data = admin.cluster_data(c)
        assert data["serviceUrlTls"] == data["serviceUrl"] == topo.registered_web_url(c)
        assert data["serviceUrl"].startswith("https://")
        assert data["brokerServiceUrlTls"] == data["brokerServiceUrl"] == topo.service_url(c)
        assert data["brokerServiceUrl"].startswith("pulsar+ssl://")
    assert sorted(admin.permissions("world/global")["workload"]) == ["consume", "produce"]


def test_secure_geo_replicates_what_the_workload_role_produced(secure_geo: LocalCluster, tmp_path: Path) -> None:
    cfg = WorkloadConfig("", producers=1, consumers=1, rate=200, duration=4)
    result = ops.workload_run(secure_geo.state_dir, cfg, tmp_path / "run", EU, consume_cluster=US)
    assert not result.errors and not result.failed, result.errors
    c = result.counters
    # consumed on us: every message crossed the TLS replicator; stored on both clusters
    assert c.acked >= 500 and c.received >= c.acked and c.stored >= 2 * c.acked
    report = replication.inspect(secure_geo, cfg.topic)
    [eu_to_us] = [d for d in report.directions if d.source == EU]
    assert (eu_to_us.destination, eu_to_us.connected, eu_to_us.backlog) == (US, True, 0), report.to_dict()


def test_rsa_tokens_are_checked_with_the_public_key_only(secure_geo: LocalCluster) -> None:
    """The pair runs the key-pair variant: brokers hold the public key, never the private one, and
    a token signed by any other key is refused on both clusters."""
    files = files_of(secure_geo.state_dir)
    auth = secure_geo.client_auth()
    assert jwt.get_unverified_header(auth.token())["alg"] == "RS256"
    assert not files.secret_key.exists()
    for broker in secure_geo.topo.nodes_of(Role.BROKER):
        conf = (secure_geo.state_dir / "nodes" / broker.name / "conf" / "broker.conf").read_text()
        keys = dict(line.split("=", 1) for line in conf.splitlines() if "=" in line and not line.startswith("#"))
        assert keys["tokenPublicKey"] == f"file://{files.public_key}"
        assert keys.get("tokenSecretKey", "") == "" and str(files.private_key) not in conf
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode({"sub": "admin"}, other, algorithm="RS256")
    for c in (EU, US):
        tenants = f"{secure_geo.admin_url(c)}/admin/v2/tenants"
        assert requests.get(tenants, headers=auth.headers(), verify=auth.verify, timeout=10).status_code == 200
        refused = requests.get(tenants, headers={"Authorization": f"Bearer {forged}"}, verify=auth.verify, timeout=10)
        assert refused.status_code == 401, (c, refused.status_code)


def test_clients_fail_over_over_tls_with_their_token_and_come_back(secure_geo: LocalCluster, tmp_path: Path) -> None:
    """geo-client-failover on the secure pair: the Java client's AutoClusterFailover moves producer
    and consumer from cluster-eu to cluster-us (pulsar+ssl URLs, the CA checked with hostnames, the
    token kept) when eu is killed, and back once eu has served again; nothing acknowledged lost."""
    spec = scaled_builtin("geo-client-failover", tmp_path / "spec")
    result = CliRunner().invoke(app, ["scenario", "run", str(spec), "--on", str(secure_geo.state_dir), "--json",
                                      "--out", str(tmp_path)])
    v = json.loads(result.stdout)
    assert result.exit_code == 0 and v["status"] == "pass", json.dumps({k: v.get(k) for k in ("reasons", "expectations")})
    for c in v["failover"]["clients"]:
        assert c["home"] == EU and c["moved_to"] == [US] and c["switch_back_s"] is not None, c
    assert v["rpo"] == 0 and v["checks"]["lost"] == 0
    assert all(secure_geo.alive(n.name) for n in secure_geo.topo.nodes)
