"""Readiness as small composable probes, each polled until it holds or its timeout runs out.

A probe answers ``(ok, detail)``. :func:`wait_for` polls a probe at an interval; when the node's
process dies or the timeout passes it raises :class:`NodeStartError` naming the node, what it
waited for, the last thing the probe saw, and the tail of the node's log.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from pulsarlab.errors import NodeStartError
from pulsarlab.security import ClientAuth

Probe = Callable[[], tuple[bool, str]]


def log_tail(path: Path | None, lines: int = 25) -> str:
    if path is None or not path.is_file():
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 64 * 1024))
        text = fh.read().decode("utf-8", "replace")
    # stack frames crowd out the lines that say what went wrong
    kept = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("at ", "... "))]
    return "\n".join(kept[-lines:])


def zk_command(address: str, port: int, command: bytes) -> str:
    """Send one ZooKeeper four-letter command and return the whole answer."""
    with socket.create_connection((address, port), timeout=3) as s:
        s.sendall(command)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass
class ZkServing:
    """ZooKeeper answers ``imok`` to ``ruok`` *and* serves requests (``srvr`` reports its mode).
    ``ruok`` alone answers while a restarted server is still loading its database, when its
    restored sessions and ephemeral nodes are not visible yet."""

    address: str
    port: int

    @property
    def description(self) -> str:
        return f"ZooKeeper 'ruok' -> 'imok' and serving on {self.address}:{self.port}"

    def __call__(self) -> tuple[bool, str]:
        try:
            ok = zk_command(self.address, self.port, b"ruok")
            if ok != "imok":
                return False, f"ruok answered {ok!r}"
            srvr = zk_command(self.address, self.port, b"srvr")
        except OSError as exc:
            return False, str(exc)
        return "Mode:" in srvr, srvr.strip().splitlines()[0] if srvr.strip() else "no answer to srvr"


def zk_ephemerals(address: str, port: int) -> list[str]:
    """Paths of every ephemeral znode, from ZooKeeper's four-letter ``dump`` command."""
    text = zk_command(address, port, b"dump")
    return [line.strip() for line in text.splitlines() if line.startswith("\t/")]


@dataclass
class RegistrationGone:
    """No ephemeral znode of a previous incarnation (a killed process's session) is left, as the
    first of ``servers`` (ZooKeeper's ``(address, client port)``) that answers says: one that is
    restarting or gone does not hold the wait up while another can tell."""

    servers: tuple[tuple[str, int], ...]
    suffix: str

    @property
    def description(self) -> str:
        return f"the previous registration */{self.suffix} to expire in ZooKeeper"

    def __call__(self) -> tuple[bool, str]:
        said = "no ZooKeeper server to ask"
        for address, port in self.servers:
            try:
                left = [p for p in zk_ephemerals(address, port) if p.endswith("/" + self.suffix)]
            except OSError as exc:
                said = f"{address}:{port}: {exc}"
                continue
            return not left, f"still registered: {', '.join(left)}"
        return False, said


@dataclass
class HttpOk:
    """An HTTP GET answers 2xx (and, optionally, a body that satisfies ``accept``)."""

    url: str
    what: str = ""
    accept: Callable[[requests.Response], bool] | None = None
    auth: ClientAuth | None = None  # a secure broker: bearer token and the CA to verify it with

    @property
    def description(self) -> str:
        return self.what or f"HTTP 200 from {self.url}"

    def __call__(self) -> tuple[bool, str]:
        try:
            if self.auth is None:
                r = requests.get(self.url, timeout=3)
            else:
                r = requests.get(self.url, timeout=3, headers=self.auth.headers(), verify=self.auth.verify)
        except requests.RequestException as exc:
            return False, type(exc).__name__
        if not r.ok:
            return False, f"HTTP {r.status_code} {r.text[:120]!r}"
        if self.accept and not self.accept(r):
            return False, f"not yet: {r.text[:160]!r}"
        return True, "ok"


def wait_for(
    node: str,
    probe: Probe,
    *,
    what: str,
    timeout: float,
    interval: float = 0.5,
    log_file: Path | Callable[[], Path | None] | None = None,
    alive: Callable[[], bool] | None = None,
) -> float:
    """Poll ``probe`` until it holds; return the seconds it took. Fails fast if ``alive`` turns false.
    ``log_file`` (or a function giving it when the wait fails: the log of what the probe last found
    missing) is the log whose tail the error shows."""
    def tail() -> str:
        return log_tail(log_file() if callable(log_file) else log_file)

    start = time.monotonic()
    detail = ""
    while True:
        ok, detail = probe()
        if ok:
            return time.monotonic() - start
        if alive is not None and not alive():
            raise NodeStartError(node, what, time.monotonic() - start, tail(), "the process exited")
        if time.monotonic() - start > timeout:
            raise NodeStartError(node, what, timeout, tail(), f"last seen: {detail}")
        time.sleep(interval)
