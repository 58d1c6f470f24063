"""Where a running deployment answers, as environment variables and a Java ``client.conf``.

``pulsarlab env`` prints these so that ``eval "$(pulsarlab env)"`` points a shell, the Pulsar
clients and the distribution's ``bin/pulsar-admin`` / ``bin/pulsar-perf`` at the cluster. On a
secure cluster they name the admin token's file and the CA (never the token), and ``client.conf``
carries ``authPlugin``/``authParams=file:...`` and ``tlsTrustCertsFilePath``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.deployment import Endpoints
from pulsarlab.errors import PulsarlabError, UsageError

FORMATS = ("shell", "json", "dotenv")
CLIENT_CONF = "client.conf"


@dataclass(frozen=True)
class ClusterEnv:
    variables: dict[str, str]
    client_conf: Path


def admin_url(cluster: Endpoints, name: str) -> str:
    """One web URL of the cluster: a broker that answers now, else the first broker's."""
    try:
        return cluster.admin_url(name)
    except PulsarlabError:
        return cluster.topo.web_url(name).split(",")[0]


def suffix(name: str) -> str:
    """A cluster name as an environment variable suffix: upper case, anything else than [A-Z0-9] as ``_``."""
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def cluster_env(cluster: Endpoints, name: str | None = None) -> ClusterEnv:
    """The variables for ``name`` (default: the first cluster) and every cluster; writes ``client.conf``."""
    topo = cluster.topo
    names = [c.name for c in topo.clusters]
    chosen = name or names[0]
    if chosen not in names:
        raise UsageError(f"no cluster {chosen!r} in topology {topo.name!r} (clusters: {', '.join(names)})")
    urls = {n: (topo.service_url(n), admin_url(cluster, n)) for n in names}
    conf = cluster.state_dir / CLIENT_CONF
    auth = cluster.client_auth() if topo.security is not None else None
    lines = [f"# written by pulsarlab env for cluster {chosen} of {topo.name}",
             f"webServiceUrl={urls[chosen][1]}", f"brokerServiceUrl={urls[chosen][0]}",
             *(auth.client_conf_lines() if auth else [])]
    conf.write_text("\n".join(lines) + "\n")
    variables = {"PULSAR_SERVICE_URL": urls[chosen][0], "PULSAR_ADMIN_URL": urls[chosen][1]}
    if auth is not None:  # the files, never the token itself
        if auth.token_file is not None:
            variables["PULSAR_AUTH_TOKEN_FILE"] = str(auth.token_file)
        if auth.ca_file is not None:
            variables["PULSAR_TLS_TRUST_CERTS_FILE"] = str(auth.ca_file)
    if (plain := topo.plain_service_url(chosen)) is not None:  # brokers serve plain text beside TLS
        variables["PULSAR_PLAIN_SERVICE_URL"] = plain
        variables["PULSAR_PLAIN_ADMIN_URL"] = (topo.plain_web_url(chosen) or "").split(",")[0]
    for n, (service, web) in urls.items():
        variables[f"PULSAR_SERVICE_URL_{suffix(n)}"] = service
        variables[f"PULSAR_ADMIN_URL_{suffix(n)}"] = web
    variables["PULSAR_CLIENT_CONF"] = str(conf)
    variables["PULSARLAB_STATE_DIR"] = str(cluster.state_dir)
    return ClusterEnv(variables, conf)


def render(variables: dict[str, str], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(variables, indent=2)
    if fmt == "shell":
        return "\n".join(f"export {k}={shlex.quote(v)}" for k, v in variables.items())
    if fmt == "dotenv":
        return "\n".join(f"{k}={v}" for k, v in variables.items())
    raise UsageError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
