#!/usr/bin/env python3
"""Wait until auto-recovery lists no under-replicated ledger that holds entries.

Run on a bookie's host by the ``pulsar_node`` role (``tasks/underreplicated.yml``)::

    wait_replicated.py BOOKIE_HTTP_URL TIMEOUT

Polls the bookie's ``/api/v1/autorecovery/list_under_replicated_ledger`` and reads the metadata of
each ledger listed. BookKeeper can keep a ledger marked after every bookie of it is back when its
fragments hold no confirmed entry: its recheck of such a fragment only consults its own view of the
registered bookies (seen after region drills, for the ledgers of idle topics). Two kinds of listed
ledger therefore do not hold the wait and are named on stdout instead:

- closed with no entry (``lastEntryId`` -1): nothing to copy;
- open, no entry of it confirmed to its bookies (reading entry 0 through the bookie gives none:
  nothing written, or only entries whose confirmation would ride on a next one) and every bookie
  of its ensembles registered again: what it holds is on bookies that are all back, which is what
  BookKeeper's own recheck finds once its view of them is fresh.

Every other listed ledger is waited for; after TIMEOUT seconds the script exits 1 naming each one
with the bookies of each of its fragments. Standard library only (any host Ansible manages has
Python).
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


def bookies_of(meta: dict[str, Any]) -> set[str]:
    """Every bookie id of a ledger's ensembles."""
    return {b.get("id", "?") if isinstance(b, dict) else str(b) for bs in (meta.get("allEnsembles") or {}).values() for b in bs}


def split(listed: list[int], metadata: dict[int, dict[str, Any] | None],
          quiet: frozenset[int] | set[int] = frozenset()) -> tuple[list[int], list[int], list[int]]:
    """(ledgers still at risk, closed ones that hold nothing, open ones of ``quiet``: none of their
    entries confirmed and every bookie of them registered). A ledger whose metadata could not be
    read stays at risk (a deleted one drops off the list by itself)."""
    at_risk: list[int] = []
    empty: list[int] = []
    idle: list[int] = []
    for ledger in listed:
        meta = metadata.get(ledger)
        if meta is not None and holds_nothing(meta):
            empty.append(ledger)
        elif meta is not None and not meta.get("closed") and ledger in quiet:
            idle.append(ledger)
        else:
            at_risk.append(ledger)
    return at_risk, empty, idle


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


def registered(base: str) -> set[str]:
    """The ids of the bookies registered now, writable or read-only."""
    ids: set[str] = set()
    for kind in ("rw", "ro"):
        status, body = _get(f"{base}/api/v1/bookie/list_bookies?type={kind}&print_hostnames=false")
        if status != 200:
            raise RuntimeError(f"the bookie answered {status} to list_bookies: {body[:300]}")
        ids.update(json.loads(body) or {})
    return ids


def unconfirmed(base: str, ledger: int) -> bool:
    """True when the bookies have no entry of the ledger confirmed: reading its entry 0 (as far
    as the last confirmed one, the ledger neither recovered nor fenced) gives nothing."""
    status, body = _get(f"{base}/api/v1/ledger/read/?ledger_id={ledger}&start_entry_id=0&end_entry_id=0")
    try:
        return status == 200 and json.loads(body) == {}
    except ValueError:
        return False


def quiet(base: str, metadata: dict[int, dict[str, Any] | None]) -> set[int]:
    """The open ledgers of ``metadata`` with no confirmed entry whose bookies are all registered."""
    open_ones = {i: m for i, m in metadata.items() if m is not None and not m.get("closed")}
    if not open_ones:
        return set()
    up = registered(base)
    return {i for i, m in open_ones.items() if bookies_of(m) <= up and unconfirmed(base, i)}


def assess(base: str) -> tuple[list[int], list[int], list[int], dict[int, dict[str, Any] | None]]:
    """What the bookie at ``base`` lists now, as :func:`split` sorts it, with each ledger's metadata."""
    ids = listed(base)
    meta = {i: metadata(base, i) for i in ids}
    at_risk, empty, idle = split(ids, meta, quiet(base, meta))
    return at_risk, empty, idle, meta


def wait(base: str, timeout: float, sleep: float = POLL_S) -> tuple[bool, str]:
    """Poll until no listed ledger holds entries: (True, what was found) or, after ``timeout``
    seconds, (False, why). A bookie that does not answer (restarting, a connection closed) is asked
    again until the deadline, like a ledger still listed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            at_risk, empty, idle, meta = assess(base)
            error = None
        except (OSError, RuntimeError, ValueError) as exc:
            at_risk, empty, idle, error = [], [], [], str(exc)
        if error is None and not at_risk:
            marked = [f"closed without entries (nothing to copy): {', '.join(map(str, empty))}"] if empty else []
            if idle:
                marked.append("open with no entry confirmed and every bookie of it registered: " + ", ".join(map(str, idle)))
            if marked:
                return True, "no ledger with entries is under-replicated; still marked, " + "; ".join(marked)
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
