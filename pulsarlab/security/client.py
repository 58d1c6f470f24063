"""What a client needs to reach a secure cluster: a token file and the CA to trust (paths only:
the token is read when a call is made and never stored elsewhere)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulsar

TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
# the C++ client's own log lines (a broker refusing connections during a fault, say): appended
# here, never on stdout, where a command's --json document goes
CLIENT_LOG = Path(tempfile.gettempdir()) / "pulsarlab-pulsar-client.log"


@dataclass(frozen=True)
class ClientAuth:
    """A role's token file (None: no authentication) and the CA certificate (None: plain text)."""

    token_file: Path | None = None
    ca_file: Path | None = None

    def token(self) -> str:
        if self.token_file is None:
            return ""
        return self.token_file.read_text().strip()

    def headers(self) -> dict[str, str]:
        """The admin REST API's ``Authorization: Bearer <jwt>`` (exactly ``Bearer``)."""
        return {"Authorization": f"Bearer {self.token()}"} if self.token_file else {}

    @property
    def verify(self) -> str | bool:
        """``requests``' ``verify``: the CA file (hostnames are always checked), or the default."""
        return str(self.ca_file) if self.ca_file else True

    def pulsar_client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``pulsar.Client`` (lazy import: ``pulsar`` is heavy)."""
        import pulsar

        kw: dict[str, Any] = {}
        if self.token_file is not None:
            kw["authentication"] = pulsar.AuthenticationToken(self.token())
        if self.ca_file is not None:
            kw.update(tls_trust_certs_file_path=str(self.ca_file), tls_validate_hostname=True,
                      tls_allow_insecure_connection=False)
        return kw

    def java_config(self) -> dict[str, str]:
        """The workload driver's ``token_file`` and ``tls_trust_certs_file`` (empty when open)."""
        out = {}
        if self.token_file is not None:
            out["token_file"] = str(self.token_file)
        if self.ca_file is not None:
            out["tls_trust_certs_file"] = str(self.ca_file)
        return out

    def client_conf_lines(self) -> list[str]:
        """``client.conf`` keys for pulsar-admin / pulsar-client / pulsar-perf (the token by file)."""
        lines = []
        if self.token_file is not None:
            lines += [f"authPlugin={TOKEN_PLUGIN}", f"authParams=file://{self.token_file}"]
        if self.ca_file is not None:
            lines += [f"tlsTrustCertsFilePath={self.ca_file}", "tlsAllowInsecureConnection=false",
                      "tlsEnableHostnameVerification=true"]
        return lines


OPEN = ClientAuth()


def client(service_url: str, operation_timeout: int = 30, auth: ClientAuth | None = None) -> pulsar.Client:
    """A pulsar-client that logs only errors (the C++ client is chatty at info), into
    :data:`CLIENT_LOG`; with ``auth``, it sends that token and trusts that CA (hostnames verified)."""
    return pulsar.Client(
        service_url,
        operation_timeout_seconds=operation_timeout,
        connection_timeout_ms=5000,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, str(CLIENT_LOG)),
        **(auth.pulsar_client_kwargs() if auth else {}),
    )
