"""A deployment's identity outside pulsarlab: a short digest of its resolved state directory.

Everything a deployment names on the machine derives from it (its cgroups, the comments of its
packet-filter rules, its compose project, its class-data recordings), so two deployments never
share a name, and a later process (a ``heal`` after a crash, a ``down``) finds what an earlier one made.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

DIGEST_CHARS = 12


def state_digest(state_dir: Path | str) -> str:
    """12 hex characters of the SHA-256 of the state directory's absolute, resolved path."""
    return hashlib.sha256(str(Path(state_dir).resolve()).encode()).hexdigest()[:DIGEST_CHARS]
