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


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "raise":
        seconds = int(argv[1])
        for url in argv[2:]:
            before = read(url)
            if before is not None:
                write(url, seconds)
                print(json.dumps({"url": url, "before": before}))
                return 0
        print(json.dumps({"url": "", "before": None}))
        return 0
    if len(argv) in (3, 4) and argv[0] == "restore":
        seconds, url = int(argv[1]), argv[2]
        before = argv[3] if len(argv) == 4 else ""
        value = 0 if not before.lstrip("-").isdigit() or int(before) == seconds else int(before)
        last = ""
        for _ in range(12):
            try:
                write(url, value)
                print(json.dumps({"url": url, "delay": value}))
                return 0
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
                time.sleep(5)
        print(f"could not set the lost-bookie recovery delay back to {value} through {url}: {last}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
