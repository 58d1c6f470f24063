"""A small HTTP API served on loopback for unit tests of the playbooks' helper scripts."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def served(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a free loopback port; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


class Hangups:
    """The first ``count`` requests a handler takes are closed without a response (a bookie's
    web server while it restarts: urllib's "Remote end closed connection without response")."""

    def __init__(self, count: int) -> None:
        self.left = count
        self.lock = threading.Lock()

    def hang_up(self, handler: http.server.BaseHTTPRequestHandler) -> bool:
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
        handler.close_connection = True
        return True
