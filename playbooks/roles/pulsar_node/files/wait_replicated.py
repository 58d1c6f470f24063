#!/usr/bin/env python3
"""Wait until auto-recovery lists no under-replicated ledger that holds entries.

Run on a bookie's host by the ``pulsar_node`` role (``tasks/underreplicated.yml``)::

    wait_replicated.py BOOKIE_HTTP_URL TIMEOUT

Polls the bookie's ``/api/v1/autorecovery/list_under_replicated_ledger`` and reads the metadata of
each ledger listed. A ledger that is closed with no entry (``lastEntryId`` -1) has nothing to copy:
BookKeeper can keep such a ledger marked after every bookie of it is back (its recheck of an empty
fragment only consults its own view of the registered bookies; seen after a region drill), so it
does not hold the wait; it is named on stdout instead. Every other listed ledger is waited for; after
TIMEOUT seconds the script exits 1 naming each one with the bookies of each of its fragments.
Standard library only (any host Ansible manages has Python).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from typing import Any

POLL_S = 5.0
NONE_LISTED = "No under replicated ledgers found"


def holds_nothing(meta: dict[str, Any]) -> bool:
    """A closed ledger with no entry: nothing of it can be lost."""
    return bool(meta.get("closed")) and meta.get("lastEntryId") == -1 and not meta.get("length")


def ensembles(meta: dict[str, Any]) -> str:
    """``first entry: bookie, bookie; ...`` of a ledger's metadata."""
    parts = []
    for first, bookies in sorted((meta.get("allEnsembles") or {}).items(), key=lambda kv: int(kv[0])):
        parts.append(f"from entry {first}: " + ", ".join(b.get("id", "?") if isinstance(b, dict) else str(b) for b in bookies))
    return "; ".join(parts) or "no ensemble"


def describe(ledgers: list[int], metadata: dict[int, dict[str, Any] | None]) -> str:
    """``ID (closed|open, last entry N; from entry 0: bookie, bookie) | ...`` of listed ledgers."""
    return " | ".join(
        f"{i} ({'closed' if (metadata.get(i) or {}).get('closed') else 'open'}, last entry "
        f"{(metadata.get(i) or {}).get('lastEntryId', '?')}; {ensembles(metadata.get(i) or {})})" for i in ledgers)


def split(listed: list[int], metadata: dict[int, dict[str, Any] | None]) -> tuple[list[int], list[int]]:
    """(ledgers still at risk, ledgers marked that hold nothing). A ledger whose metadata could not
    be read stays at risk (a deleted one drops off the list by itself)."""
    at_risk, empty = [], []
    for ledger in listed:
        meta = metadata.get(ledger)
        (empty if meta is not None and holds_nothing(meta) else at_risk).append(ledger)
    return at_risk, empty


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def listed(base: str) -> list[int]:
    status, body = _get(f"{base}/api/v1/autorecovery/list_under_replicated_ledger")
    if status == 404 and NONE_LISTED in body:
        return []
    if status != 200:
        raise RuntimeError(f"the bookie answered {status}: {body[:300]}")
    return sorted(int(x) for x in json.loads(body))


def metadata(base: str, ledger: int) -> dict[str, Any] | None:
    status, body = _get(f"{base}/api/v1/ledger/metadata/?ledger_id={ledger}")
    if status != 200:
        return None
    data = json.loads(body)
    return data.get(str(ledger)) if isinstance(data, dict) else None


def wait(base: str, timeout: float, sleep: float = POLL_S) -> tuple[bool, str]:
    """Poll until no listed ledger holds entries: (True, what was found) or, after ``timeout``
    seconds, (False, why). A bookie that does not answer (restarting, a connection closed) is asked
    again until the deadline, like a ledger still listed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            ids = listed(base)
            meta = {i: metadata(base, i) for i in ids}
            error = None
        except (OSError, RuntimeError, ValueError) as exc:
            ids, meta, error = [], {}, str(exc)
        if error is None:
            at_risk, empty = split(ids, meta)
            if not at_risk:
                if empty:
                    return True, (f"no ledger with entries is under-replicated; still marked, closed without entries "
                                  f"(nothing to copy): {', '.join(map(str, empty))}")
                return True, "no ledger is under-replicated"
        if time.monotonic() >= deadline:
            if error is not None:
                return False, f"could not read the under-replicated ledgers from {base} for {timeout:.0f} s: {error}"
            return False, f"ledgers still under-replicated after {timeout:.0f} s: " + describe(at_risk, meta)
        time.sleep(sleep)


def main(base: str, timeout: float) -> int:
    ok, said = wait(base, timeout)
    print(said)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1].rstrip("/"), float(sys.argv[2])))
