"""The admin client against a tiny local HTTP server: redirects, errors, retries."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pulsarlab.admin.client import AdminClient, AdminError


class Recorder(BaseHTTPRequestHandler):
    seen: list[dict] = []
    flaky_left = {"n": 0}

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _reply(self, status: int, body: object = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        port = self.server.server_address[1]
        self.seen.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                          "host": self.headers.get("Host"), "body": body})
        if self.path.startswith("/admin/v2/moved"):
            # the owner lives on another host name: requests itself would drop Authorization here
            self._reply(307, headers={"Location": f"http://localhost:{port}/admin/v2/owner?authoritative=true"})
        elif self.path.startswith("/admin/v2/owner"):
            self._reply(200, {"served": True})
        elif self.path.startswith("/admin/v2/bad"):
            self._reply(412, {"reason": "Bookie 'group' parameters is missing"})
        elif self.path.startswith("/admin/v2/flaky"):
            if self.flaky_left["n"] > 0:
                self.flaky_left["n"] -= 1
                self._reply(503, {"reason": "not ready"})
            else:
                self._reply(200, {"ok": True})
        elif self.path.startswith("/admin/v2/loop"):
            self._reply(307, headers={"Location": "/admin/v2/loop"})
        else:
            self._reply(404, {"reason": "no such thing"})

    do_GET = do_PUT = do_POST = do_DELETE = _handle


@pytest.fixture()
def server() -> Iterator[str]:
    Recorder.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_redirect_keeps_headers_body_and_location_query(server: str) -> None:
    admin = AdminClient(server, headers={"Authorization": "Bearer t0ken"}, backoff=0.01)
    r = admin.request("POST", "/admin/v2/moved", body={"rack": "eu/1"}, params={"group": "eu"}, idempotent=True)
    assert r.json() == {"served": True}
    first, second = Recorder.seen
    assert first["path"] == "/admin/v2/moved?group=eu"
    assert second["path"] == "/admin/v2/owner?authoritative=true"  # Location's query, not ours
    assert second["host"].startswith("localhost:")
    assert second["method"] == "POST"
    assert second["auth"] == "Bearer t0ken"
    assert json.loads(second["body"]) == {"rack": "eu/1"}


def test_error_carries_method_url_status_and_reason(server: str) -> None:
    admin = AdminClient(server, backoff=0.01)
    with pytest.raises(AdminError) as info:
        admin.request("POST", "/admin/v2/bad", body={"rack": "x"})
    e = info.value
    assert (e.method, e.status, e.reason) == ("POST", 412, "Bookie 'group' parameters is missing")
    assert e.url == f"{server}/admin/v2/bad"
    assert "POST" in str(e) and "412" in str(e) and "group" in str(e)


def test_safe_calls_retry_5xx_and_unsafe_calls_do_not(server: str) -> None:
    admin = AdminClient(server, retries=3, backoff=0.01)
    Recorder.flaky_left["n"] = 2
    assert admin.get_json("/admin/v2/flaky") == {"ok": True}
    assert len(Recorder.seen) == 3
    Recorder.seen.clear()
    Recorder.flaky_left["n"] = 1
    with pytest.raises(AdminError) as info:
        admin.request("POST", "/admin/v2/flaky", body=1)
    assert info.value.status == 503 and len(Recorder.seen) == 1


def test_missing_status_reads_as_none_and_redirect_loops_stop(server: str) -> None:
    admin = AdminClient(server, backoff=0.01, max_redirects=3)
    assert admin.get_json("/admin/v2/nothing", missing=(404,)) is None
    with pytest.raises(AdminError, match="redirects"):
        admin.request("GET", "/admin/v2/loop")


def test_connection_refused_is_an_admin_error_without_status() -> None:
    admin = AdminClient("http://127.0.0.1:9", retries=1, backoff=0.01, timeout=2)
    with pytest.raises(AdminError) as info:
        admin.version()
    assert info.value.status is None and info.value.method == "GET"
