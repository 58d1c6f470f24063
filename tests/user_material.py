"""Security material made the way an operator makes their own, with the ``openssl`` command: a CA,
one broker certificate naming the brokers' addresses, client certificates whose common name is a
role, a token secret, and an htpasswd file with apr1 hashes (``openssl passwd -apr1``, what
``htpasswd -m`` writes)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class UserMaterial:
    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    @property
    def security(self) -> dict[str, str]:
        """The topology's ``security`` file fields for this material."""
        return {"ca_file": str(self.path("ca.pem")), "cert_file": str(self.path("broker.pem")),
                "key_file": str(self.path("broker.key")), "token_key_file": str(self.path("secret.key")),
                "htpasswd_file": str(self.path("htpasswd"))}


def _openssl(folder: Path, *args: str) -> str:
    proc = subprocess.run(["openssl", *args], cwd=folder, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


def make(folder: Path, broker_ips: list[str], client_roles: tuple[str, ...] = (),
         users: dict[str, str] | None = None, ca_name: str = "ca") -> UserMaterial:
    """``folder``'s CA (``<ca_name>.pem``/``.key``), ``broker.pem``/``.key`` (IP names: ``broker_ips``),
    ``<role>.pem``/``.key`` per client role, ``secret.key`` and ``htpasswd`` (user: password)."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl(folder, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca_name}.key", "-out", f"{ca_name}.pem",
             "-days", "30", "-subj", f"/CN=operator {ca_name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    names = ",".join(["DNS:localhost", *(f"IP:{ip}" for ip in broker_ips)])
    _sign(folder, "broker", "broker", ca_name, f"subjectAltName={names}\nextendedKeyUsage=serverAuth,clientAuth\n")
    for role in client_roles:
        _sign(folder, role, role, ca_name, "extendedKeyUsage=clientAuth\n")
    (folder / "secret.key").write_bytes(bytes.fromhex(_openssl(folder, "rand", "-hex", "32").strip()))
    lines = [f"{user}:{_openssl(folder, 'passwd', '-apr1', password).strip()}" for user, password in (users or {}).items()]
    (folder / "htpasswd").write_text("".join(f"{line}\n" for line in lines))
    return UserMaterial(folder)


def _sign(folder: Path, name: str, common_name: str, ca_name: str, extensions: str) -> None:
    (folder / f"{name}.ext").write_text(extensions)
    _openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", f"/CN={common_name}")
    _openssl(folder, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca_name}.pem", "-CAkey", f"{ca_name}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "30", "-extfile", f"{name}.ext")
