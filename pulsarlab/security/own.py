"""The user's own security material (``security.ca_file``, ``cert_file``, ``key_file``,
``token_key_file``, ``htpasswd_file``): every problem found at once before anything is written,
then each file copied into the deployment's security folder under the name the rendered files
and every target read (a broker's ``cert.pem``/``key.pem``, ``ca.pem``, the token key, ``htpasswd``).

Checked: each file parses as what it must be (PEM certificates, an unencrypted private key, an RSA
key for ``token: rsa``, a 256-bit secret for ``symmetric``, htpasswd lines with hashes Pulsar
reads); the key is the certificate's; the CA signed the certificate; it is valid now; and its IP
names cover every broker's address (clients check the name they dial: pulsarlab's own dial the
address).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pulsarlab.errors import UsageError
from pulsarlab.topology import Role, Security, Topology

SECRET_BYTES = 32  # HS256: a key shorter than the hash is refused
# Pulsar's basic authentication reads MD5 (apr1) and crypt hashes, nothing else
HTPASSWD_LINE = re.compile(r"[^:\s]+:(\$apr1\$[./0-9A-Za-z]{1,8}\$[./0-9A-Za-z]{22}|[./0-9A-Za-z]{13})")


def check(topo: Topology) -> None:
    """Raise :class:`UsageError` naming every problem of the files the topology's security names."""
    wrong = problems(topo)
    if wrong:
        raise UsageError("the security files the topology names cannot be used:\n  " + "\n  ".join(wrong))


def problems(topo: Topology) -> list[str]:
    """What is wrong with the files the topology's security names (empty: nothing)."""
    sec = topo.security
    if sec is None:
        return []
    found: list[str] = []
    if sec.cert_file and sec.key_file and sec.ca_file:
        found += _tls_problems(topo, sec)
    if sec.token_key_file:
        found += _token_key_problems(sec)
    if sec.htpasswd_file:
        found += _htpasswd_problems(Path(sec.htpasswd_file))
    return found


def _read_cert(path: Path, field: str, found: list[str]) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError:
        found.append(f"security.{field} {path}: not a PEM certificate")
        return None


def _tls_problems(topo: Topology, sec: Security) -> list[str]:
    found: list[str] = []
    ca = _read_cert(Path(str(sec.ca_file)), "ca_file", found)
    cert = _read_cert(Path(str(sec.cert_file)), "cert_file", found)
    key = None
    key_path = Path(str(sec.key_file))
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except TypeError:
        found.append(f"security.key_file {key_path}: encrypted; the brokers read an unencrypted PEM key")
    except ValueError:
        found.append(f"security.key_file {key_path}: not a PEM private key")
    if cert is None:
        return found
    pub = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key is not None and key.public_key().public_bytes(*pub) != cert.public_key().public_bytes(*pub):
        found.append(f"security.key_file {key_path}: not the key of {sec.cert_file}")
    if ca is not None:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            found.append(f"security.cert_file {sec.cert_file}: not signed by {sec.ca_file}")
    now = dt.datetime.now(dt.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        found.append(f"security.cert_file {sec.cert_file}: valid from {cert.not_valid_before_utc:%Y-%m-%d} "
                     f"to {cert.not_valid_after_utc:%Y-%m-%d}, not now")
    named = _ip_names(cert)
    missing = [f"{b.name} ({topo.address_of(b)})" for b in topo.nodes_of(Role.BROKER)
               if ipaddress.ip_address(topo.address_of(b)) not in named]
    if missing:
        found.append(f"security.cert_file {sec.cert_file}: no IP name for broker(s) {', '.join(missing)} "
                     f"(it names {', '.join(sorted(map(str, named))) or 'no IP address'}; clients check the address they dial)")
    return found


def _ip_names(cert: x509.Certificate) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    names = san.get_values_for_type(x509.IPAddress)
    return {ip for ip in names if isinstance(ip, ipaddress.IPv4Address | ipaddress.IPv6Address)}  # not networks


def _token_key_problems(sec: Security) -> list[str]:
    path = Path(str(sec.token_key_file))
    data = path.read_bytes()
    if sec.token == "symmetric":
        if len(data) < SECRET_BYTES:
            return [f"security.token_key_file {path}: {len(data)} bytes; an HS256 secret needs at least {SECRET_BYTES}"]
        return []
    if not isinstance(rsa_private_key(data), rsa.RSAPrivateKey):
        return [f"security.token_key_file {path}: not an unencrypted RSA private key (PEM or DER), as token: rsa needs"]
    return []


def rsa_private_key(data: bytes) -> object | None:
    """The private key in ``data`` (PEM or DER), or None."""
    for load in (serialization.load_pem_private_key, serialization.load_der_private_key):
        try:
            return load(data, password=None)
        except (ValueError, TypeError):
            continue
    return None


def _htpasswd_problems(path: Path) -> list[str]:
    found, users = [], 0
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        users += 1
        if not HTPASSWD_LINE.fullmatch(line.strip()):
            found.append(f"security.htpasswd_file {path}:{n}: not user:hash with an apr1 (htpasswd -m) or crypt "
                         f"(htpasswd -d) hash, the two Pulsar reads")
    if users == 0:
        found.append(f"security.htpasswd_file {path}: no user in it")
    return found
