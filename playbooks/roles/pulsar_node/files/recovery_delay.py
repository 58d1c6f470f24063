#!/usr/bin/env python3
"""Raise BookKeeper's lost-bookie recovery delay around one bookie's restart, and set it back.

Run on the bookie's host by ``upgrade.yml`` (one run each way, instead of one module run per peer)::

    recovery_delay.py raise SECONDS PEER_HTTP_URL...
    recovery_delay.py restore SECONDS PEER_HTTP_URL BEFORE

The delay is the cluster's (kept in its metadata store), read and written through
``/api/v1/autorecovery/lost_bookie_recovery_delay`` of another bookie. ``raise`` asks the peers in
the order given, keeps the first that answers, sets the delay to SECONDS through it and prints
``{"url": ..., "before": N}``; when none answers it prints ``{"url": "", "before": null}`` (no
bookie can mark the restarting one lost then) and exits 0. ``restore`` sets the delay back to
BEFORE through the same peer, retrying for a minute; a BEFORE that is missing or equal to SECONDS
(left by an interrupted run) becomes 0, the rendered value. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.error
import urllib.request

PATH = "/api/v1/autorecovery/lost_bookie_recovery_delay"
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


def restore(url: str, value: int, attempts: int = 12, sleep: float = 5.0) -> str | None:
    """Write ``value`` through ``url``, asking again while the peer does not answer: None once
    written, else the last error."""
    last = ""
    for attempt in range(attempts):
        try:
            write(url, value)
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
                print(json.dumps({"url": url, "before": before}))
                return 0
        print(json.dumps({"url": "", "before": None}))
        return 0
    if len(argv) in (3, 4) and argv[0] == "restore":
        seconds, url = int(argv[1]), argv[2]
        value = restored_value(seconds, argv[3] if len(argv) == 4 else None)
        error = restore(url, value)
        if error is None:
            print(json.dumps({"url": url, "delay": value}))
            return 0
        print(f"could not set the lost-bookie recovery delay back to {value} through {url}: {error}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
