"""``pulsarlab token create`` and ``pulsarlab grant``: credentials and rights for an operator's own clients."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from pulsarlab.deployment import Endpoints
from pulsarlab.errors import StateError, UsageError
from pulsarlab.topology import GRANT_ACTIONS

ACTIONS = GRANT_ACTIONS
_TTL = re.compile(r"(\d+)([smhd])")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_ttl(text: str) -> dt.timedelta:
    """``90s``, ``15m``, ``2h``, ``30d`` -> a positive duration (a usage error otherwise)."""
    m = _TTL.fullmatch(text.strip())
    if not m or int(m.group(1)) == 0:
        raise UsageError(f"--ttl {text!r}: a positive number followed by s, m, h or d (e.g. 30m, 12h, 7d)")
    return dt.timedelta(**{_UNIT[m.group(2)]: int(m.group(1))})


def _secure(cluster: Endpoints):
    sec = cluster.topo.security
    if sec is None:
        raise StateError(f"cluster {cluster.topo.name!r} in {cluster.state_dir} is not secure (bring it up with --secure)")
    return sec


def create_token(cluster: Endpoints, role: str, ttl: str | None = None, out: Path | None = None) -> str:
    """A token for ``role`` signed with the deployment's key; with ``out``, written there (0600)."""
    sec = _secure(cluster)
    from pulsarlab.security import material  # the token code (PyJWT, cryptography): loaded when a token is made

    token = material.mint(material.files_of(cluster.state_dir), sec, role, parse_ttl(ttl) if ttl else None)
    if out is not None:
        material.write_private(out, (token + "\n").encode())
    return token


def parse_actions(text: str) -> list[str]:
    actions = sorted({a.strip() for a in text.split(",") if a.strip()})
    bad = [a for a in actions if a not in ACTIONS]
    if not actions or bad:
        raise UsageError(f"--actions {text!r}: a comma-separated list of {', '.join(ACTIONS)}")
    return actions


def grant(cluster: Endpoints, role: str, namespace: str, actions: str) -> list[str]:
    """Grant ``role`` the ``actions`` on ``namespace`` (tenant/namespace) over the admin API."""
    _secure(cluster)
    from pulsarlab.topology.model import ROLE_NAME

    if not ROLE_NAME.fullmatch(role):
        from pulsarlab.security.files import ROLE_CHARS

        raise UsageError(f"not a role name: {role!r} ({ROLE_CHARS})")
    if namespace.count("/") != 1 or not all(namespace.split("/")):
        raise UsageError(f"namespace {namespace!r}: expected <tenant>/<namespace>")
    wanted = parse_actions(actions)
    from pulsarlab.admin.client import AdminError, admin_of  # requests: loaded when a grant is made, not at the CLI's start

    admin = admin_of(cluster, cluster.topo.clusters[0].name)
    try:
        admin.grant(namespace, role, wanted)
        granted = (admin.permissions(namespace) or {}).get(role, [])
    except AdminError as exc:
        if exc.status == 404:
            raise StateError(f"no namespace {namespace} on cluster {cluster.topo.name!r}") from None
        raise
    if sorted(granted) != wanted:
        raise StateError(f"granted {wanted} to {role} on {namespace}, but the cluster reads back {sorted(granted)}")
    return wanted
