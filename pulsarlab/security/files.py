"""Where a deployment's security material lives, and what a client of it uses: light (no
cryptography library), so that an open deployment's commands never load the generator
(:mod:`pulsarlab.security.material`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.errors import UsageError
from pulsarlab.security.client import ClientAuth
from pulsarlab.topology import Security, Topology

SECURITY_DIR = "security"
ROLE_CHARS = "letters, digits, _ . -"


@dataclass(frozen=True)
class SecurityFiles:
    """Where a deployment's material lives (``root`` is ``<state>/security`` or its mount point)."""

    root: Path

    @property
    def secret_key(self) -> Path:
        return self.root / "secret.key"

    @property
    def private_key(self) -> Path:
        return self.root / "private.der"

    @property
    def public_key(self) -> Path:
        return self.root / "public.der"

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def htpasswd(self) -> Path:
        return self.root / "htpasswd"

    def token(self, role: str) -> Path:
        return self.root / "tokens" / f"{role}.token"

    def node_cert(self, name: str) -> Path:
        return self.root / "nodes" / name / "cert.pem"

    def node_key(self, name: str) -> Path:
        return self.root / "nodes" / name / "key.pem"

    def validation_key(self, sec: Security) -> Path:
        """The key brokers validate tokens with."""
        return self.secret_key if sec.token == "symmetric" else self.public_key


def files_of(state_dir: Path) -> SecurityFiles:
    return SecurityFiles(state_dir.resolve() / SECURITY_DIR)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with mode 0600 from the first byte (folders 0700), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)  # an older tmp may have had another mode
    tmp.replace(path)


def client_auth(topo: Topology, state_dir: Path, role: str | None = None) -> ClientAuth | None:
    """What a client of ``role`` (default: the admin role) uses on this deployment; None if open."""
    sec = topo.security
    if sec is None:
        return None
    files = files_of(state_dir)
    token = files.token(role or sec.admin_role)
    if not token.is_file():
        raise UsageError(f"no token for role {role or sec.admin_role!r} in {files.root} (run 'pulsarlab up' first)")
    return ClientAuth(token, files.ca_cert if sec.tls else None)
