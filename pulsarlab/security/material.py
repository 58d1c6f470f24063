"""Keys, tokens, a CA and the brokers' certificates of a secure deployment, under ``<state>/security``.

Generated with ``cryptography`` and ``PyJWT`` the first time ``up`` needs them and reused after
(re-running ``up`` changes nothing); every file is written 0600 in folders 0700, and nothing
secret is printed or logged. Formats are the ones Pulsar 4.0 reads:

- symmetric: ``secret.key``, 32 random bytes written raw (``tokenSecretKey=file://...`` reads the
  file's bytes as the HS256 key);
- rsa: ``private.der`` (PKCS#8, signing only, never given to a broker) and ``public.der``
  (SubjectPublicKeyInfo DER, ``tokenPublicKey=file://...``; a PEM file is refused by the broker);
- ``tokens/<role>.token``: a JWT whose ``sub`` is the role;
- ``ca.pem`` (+ ``ca.key``) and ``nodes/<broker>/cert.pem`` + ``key.pem`` (PKCS#8 PEM): one
  certificate per broker whose SANs are its own address, ``127.0.0.1`` and ``localhost``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pulsarlab.errors import UsageError
from pulsarlab.security import own
from pulsarlab.security.files import ROLE_CHARS, SecurityFiles, files_of, write_private
from pulsarlab.topology import Node, Role, Security, Topology

CERT_DAYS = 825


# ----- tokens ------------------------------------------------------------------------------------
def _signing_key(files: SecurityFiles, sec: Security):
    if sec.token == "symmetric":
        return files.secret_key.read_bytes(), "HS256"
    return serialization.load_der_private_key(files.private_key.read_bytes(), password=None), "RS256"


def mint(files: SecurityFiles, sec: Security, role: str, ttl: dt.timedelta | None = None) -> str:
    """A token for ``role`` signed with the deployment's key (``exp`` after ``ttl`` if given)."""
    from pulsarlab.topology.model import ROLE_NAME

    if not ROLE_NAME.fullmatch(role):
        raise UsageError(f"not a role name: {role!r} ({ROLE_CHARS})")
    if ttl is not None and ttl.total_seconds() <= 0:
        raise UsageError("--ttl must be positive")
    key, alg = _signing_key(files, sec)
    claims: dict[str, object] = {"sub": role}
    if ttl is not None:
        claims["exp"] = int((dt.datetime.now(dt.UTC) + ttl).timestamp())
    return jwt.encode(claims, key, algorithm=alg)


def _keys(files: SecurityFiles, sec: Security) -> bool:
    """The signing key(s), generated if missing; True if generated now (tokens must follow)."""
    if sec.token == "symmetric":
        if files.secret_key.is_file():
            return False
        write_private(files.secret_key, os.urandom(32))
        return True
    if files.private_key.is_file() and files.public_key.is_file():
        return False
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_private(files.private_key, key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    write_private(files.public_key, key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
    return True


# ----- certificates --------------------------------------------------------------------------------
def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # a little slack for clocks


def _ca(files: SecurityFiles, name: str) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    if files.ca_cert.is_file() and files.ca_key.is_file():
        cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
        return cert, key  # type: ignore[return-value]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"pulsarlab CA {name}")])
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(_now())
        .not_valid_after(_now() + dt.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(files.ca_key, key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    write_private(files.ca_cert, cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def node_sans(address: str) -> list[x509.GeneralName]:
    """A node's certificate names: its own address, 127.0.0.1 and ``localhost``."""
    ips = dict.fromkeys([address, "127.0.0.1"])
    return [x509.DNSName("localhost"), *(x509.IPAddress(ipaddress.ip_address(a)) for a in ips)]


def cert_addresses(path: Path) -> set[str]:
    """The IP SANs of a certificate file."""
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


def issue_cert(files: SecurityFiles, ca: tuple[x509.Certificate, rsa.RSAPrivateKey], name: str,
               sans: list[x509.GeneralName]) -> None:
    """A server certificate for ``name`` signed by the CA, with ``sans``, into ``nodes/<name>/``."""
    ca_cert, ca_key = ca
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(_now())
        .not_valid_after(_now() + dt.timedelta(days=CERT_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    write_private(files.node_key(name), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    write_private(files.node_cert(name), cert.public_bytes(serialization.Encoding.PEM))


def _node_cert_current(files: SecurityFiles, node: Node, address: str) -> bool:
    path = files.node_cert(node.name)
    return path.is_file() and files.node_key(node.name).is_file() and address in cert_addresses(path)


# ----- the whole set --------------------------------------------------------------------------------
def ensure(topo: Topology, state_dir: Path) -> SecurityFiles | None:
    """Put in place what the topology's security needs: the user's own files (checked first, every
    problem at once, nothing written when one is wrong) or generated ones; return where they are
    (None when the topology is open). Generated keys, tokens and certificates are kept; a broker
    certificate whose address no longer matches the topology is issued again; tokens are minted
    again when the signing key changed."""
    sec = topo.security
    if sec is None:
        return None
    own.check(topo)
    files = files_of(state_dir)
    files.root.mkdir(parents=True, exist_ok=True, mode=0o700)
    new_key = _own_token_key(files, sec) if sec.token_key_file else _keys(files, sec)
    for role in dict.fromkeys([sec.admin_role, sec.broker_role, sec.workload_role]):
        if new_key or not files.token(role).is_file():
            write_private(files.token(role), mint(files, sec, role).encode())
    if sec.tls and sec.cert_file:
        _own_tls(files, topo, sec)
    elif sec.tls:
        ca = _ca(files, topo.name)
        for b in topo.nodes_of(Role.BROKER):
            addr = topo.address_of(b)
            if not _node_cert_current(files, b, addr):
                issue_cert(files, ca, b.name, node_sans(addr))
    if sec.htpasswd_file:
        _put(files.htpasswd, Path(sec.htpasswd_file).read_bytes())
    for d in [files.root, *(p for p in files.root.rglob("*") if p.is_dir())]:
        d.chmod(0o700)  # mkdir's mode is cut by the umask, and parents get the default
    return files


def _put(path: Path, data: bytes) -> bool:
    """``data`` into ``path`` (0600) unless it holds it already; whether it was written."""
    if path.is_file() and path.read_bytes() == data:
        return False
    write_private(path, data)
    return True


def _own_token_key(files: SecurityFiles, sec: Security) -> bool:
    """The user's signing key in place (rsa: the private key as PKCS#8 DER and its public key as
    the DER brokers read); whether it changed."""
    data = Path(str(sec.token_key_file)).read_bytes()
    if sec.token == "symmetric":
        return _put(files.secret_key, data)
    key = own.rsa_private_key(data)
    assert isinstance(key, rsa.RSAPrivateKey)  # own.problems checked it
    private = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _put(files.private_key, private) | _put(files.public_key, public)


def _own_tls(files: SecurityFiles, topo: Topology, sec: Security) -> None:
    """The user's CA, and their certificate and key (as PKCS#8 PEM) for every broker."""
    _put(files.ca_cert, Path(str(sec.ca_file)).read_bytes())
    files.ca_key.unlink(missing_ok=True)  # a generated CA's key: not the CA in place any more
    cert = Path(str(sec.cert_file)).read_bytes()
    key = serialization.load_pem_private_key(Path(str(sec.key_file)).read_bytes(), password=None)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    for b in topo.nodes_of(Role.BROKER):
        _put(files.node_cert(b.name), cert)
        _put(files.node_key(b.name), pem)
