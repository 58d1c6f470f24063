#!/usr/bin/env python3
"""Wait until one node answers its readiness check; fail at once if its JVM is gone.

Run on the node's host by the ``pulsar_node`` role (``tasks/ready.yml``)::

    wait_ready.py NODE ROLE URL_OR_ADDRESS TIMEOUT LOG_DIR

ROLE ``zookeeper``: ADDRESS is ``host:port`` and ready means ``srvr`` names a mode; ``bookie`` and
``broker``: URL answers 200. On failure the last lines of the node's newest log are printed, so the
play shows why without a second trip to the host. Standard library only (any host Ansible manages
has Python).
"""

from __future__ import annotations

import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

POLL_S = 0.5
GONE_AFTER = 3  # consecutive polls without the JVM before it counts as gone (a starting script forks)
TAIL_LINES = 40


def jvm_runs(node: str) -> bool:
    marker = f"-Dpulsarlab.node={node}".encode()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


def zookeeper_ready(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"srvr")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
        return b"Mode:" in reply
    except OSError:
        return False


def http_ready(url: str) -> bool:
    # readiness only, no data: a self-signed TLS certificate must not hide a ready broker
    context = ssl._create_unverified_context() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as reply:
            return reply.status == 200
    except (OSError, urllib.error.URLError):
        return False


def log_tail(log_dir: Path) -> str:
    # *.out: what the daemon script captures of a node's console
    found = [*log_dir.glob("*.log*"), *log_dir.glob("*.out")]
    logs = sorted((p for p in found if p.is_file()), key=lambda p: p.stat().st_mtime)
    if not logs:
        return f"(no log in {log_dir})"
    lines = logs[-1].read_text(errors="replace").splitlines()[-TAIL_LINES:]
    return f"last {len(lines)} lines of {logs[-1]}:\n" + "\n".join(lines)


def main(node: str, role: str, where: str, timeout: str, log_dir: str) -> int:
    check = zookeeper_ready if role == "zookeeper" else http_ready
    started = time.monotonic()
    deadline = started + float(timeout)
    missing = 0
    while True:
        if check(where):
            print(f"{node} ({role}) ready in {time.monotonic() - started:.1f}s")
            return 0
        missing = 0 if jvm_runs(node) else missing + 1
        if missing >= GONE_AFTER:
            print(f"{node} ({role}): its JVM exited before {where} answered ready", file=sys.stderr)
            break
        if time.monotonic() >= deadline:
            print(f"{node} ({role}): {where} not ready after {timeout}s (the JVM still runs)", file=sys.stderr)
            break
        time.sleep(POLL_S)
    print(log_tail(Path(log_dir)), file=sys.stderr)
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(f"usage: {sys.argv[0]} NODE ROLE URL_OR_ADDRESS TIMEOUT LOG_DIR")
    sys.exit(main(*sys.argv[1:]))
