#!/usr/bin/env python3
"""Hold BookKeeper's auto-recovery off one bookie's restart, and let it go again.

Run on the bookie's host by ``upgrade.yml`` (one run each way, instead of one module run per peer)::

    recovery_delay.py raise SECONDS PEER_HTTP_URL...
    recovery_delay.py restore SECONDS PEER_HTTP_URL BEFORE [PAUSED]

Both switches are the cluster's (kept in its metadata store), read and written through another
bookie: the lost-bookie recovery delay (``/api/v1/autorecovery/lost_bookie_recovery_delay``) and
ledger replication (``/api/v1/autorecovery/status``). The delay alone does not hold when the bookie
that restarts is the auditor: the auditor elected after it audits every bookie at once, delay or
not, and marks the restarting one's ledgers (seen on the rehearsal hosts); with replication off
that audit waits until it is on again, when the bookie is back.

``raise`` asks the peers in the order given, keeps the first that answers, sets the delay to
SECONDS and turns replication off through it, and prints ``{"url": ..., "before": N, "paused":
true|false}`` (``paused``: replication is to be turned on again by ``restore``); when none answers
it prints ``{"url": "", "before": null, "paused": false}`` (no bookie can mark the restarting one
lost then) and exits 0. ``restore`` sets the delay back to BEFORE through the same peer and, with
PAUSED ``true``, turns replication on, retrying each for a minute; a BEFORE that is missing or equal
to SECONDS (left by an interrupted run) becomes 0, the rendered value. Replication found off with
the delay at SECONDS was left off by an interrupted run too, and is turned on again; found off
otherwise, it was the operator's choice and stays off. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.request

PATH = "/api/v1/autorecovery/lost_bookie_recovery_delay"
STATUS = "/api/v1/autorecovery/status"
TIMEOUT_S = 10.0


def read(url: str) -> int | None:
    """The delay a peer reports, or None when it does not answer with one."""
    try:
        with urllib.request.urlopen(url + PATH, timeout=TIMEOUT_S) as resp:
            found = re.search(r"-?[0-9]+\s*$", resp.read().decode(errors="replace"))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return int(found.group()) if found else None


def write(url: str, seconds: int) -> None:
    body = json.dumps({"delay_seconds": seconds}).encode()
    req = urllib.request.Request(url + PATH, data=body, method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
        resp.read()


def written(url: str, seconds: int) -> bool:
    """Whether a write through this peer went through (a peer that answered a read may still close
    the connection on the write: the next peer is asked then)."""
    try:
        write(url, seconds)
    except (urllib.error.URLError, OSError):
        return False
    return True


def replicating(url: str) -> bool | None:
    """Whether ledger replication is on, as a peer reports it; None when it does not answer."""
    try:
        with urllib.request.urlopen(url + STATUS, timeout=TIMEOUT_S) as resp:
            return bool(json.loads(resp.read().decode(errors="replace"))["enabled"])
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
        return None


def set_replication(url: str, on: bool) -> None:
    req = urllib.request.Request(f"{url}{STATUS}?enabled={'true' if on else 'false'}", data=b"", method="PUT")
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
        resp.read()


def pause(url: str, seconds: int, before: int) -> bool:
    """Turn replication off through ``url``; whether ``restore`` is to turn it on again: it was on,
    or it was left off by an interrupted run (the delay read was the raised one)."""
    was = replicating(url)
    if was is False:
        return before == seconds
    try:
        set_replication(url, False)
    except (urllib.error.URLError, OSError):
        return False  # left as it was: the delay still holds off a bookie that is not the auditor
    return True


def restore(url: str, value: int, attempts: int = 12, sleep: float = 5.0, resume: bool = False) -> str | None:
    """Write ``value`` through ``url`` and, with ``resume``, turn replication on, asking again while
    the peer does not answer: None once done, else the last error."""
    last = ""
    for attempt in range(attempts):
        try:
            write(url, value)
            if resume:
                set_replication(url, True)
            return None
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
            if attempt + 1 < attempts:
                time.sleep(sleep)
    return last


def restored_value(seconds: int, before: str | int | None) -> int:
    """What to set back: BEFORE, or 0 (the rendered value) when it is missing or equals the raised
    delay (left by an interrupted run)."""
    text = "" if before is None else str(before)
    return 0 if not text.lstrip("-").isdigit() or int(text) == seconds else int(text)


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "raise":
        seconds = int(argv[1])
        for url in argv[2:]:
            before = read(url)
            if before is not None and written(url, seconds):
                print(json.dumps({"url": url, "before": before, "paused": pause(url, seconds, before)}))
                return 0
        print(json.dumps({"url": "", "before": None, "paused": False}))
        return 0
    if 3 <= len(argv) <= 5 and argv[0] == "restore":
        seconds, url = int(argv[1]), argv[2]
        value = restored_value(seconds, argv[3] if len(argv) >= 4 else None)
        resume = len(argv) == 5 and argv[4].lower() == "true"
        error = restore(url, value, resume=resume)
        if error is None:
            print(json.dumps({"url": url, "delay": value, "replication": "on again" if resume else "as it was"}))
            return 0
        also = " and turn replication on" if resume else ""
        print(f"could not set the lost-bookie recovery delay back to {value}{also} through {url}: {error}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
