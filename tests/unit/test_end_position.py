"""The read-back's end position: asked of a cluster's brokers in turn until one answers, within a
bounded wait (a broker busy after a fault, another one down)."""

from __future__ import annotations

import json
import socket
import time

import pytest

from pulsarlab.workload.run import end_position
from tests.http_served import QuietHandler, served

TOPIC = "persistent://t/n/orders"


def closed_port_url() -> str:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


class Busy(QuietHandler):
    """Answers 503 to its first two requests (a broker still taking over the topics), then the id."""
    asked = 0

    def do_GET(self) -> None:
        type(self).asked += 1
        if type(self).asked <= 2:
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"ledgerId": 12, "entryId": 34, "partitionIndex": -1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_down_broker_and_a_busy_one_still_give_the_end_once_the_busy_one_answers() -> None:
    Busy.asked = 0
    with served(Busy) as busy:
        t0 = time.monotonic()
        got = end_position(TOPIC, [closed_port_url(), busy], "eu", None)
    assert got == {"topic": TOPIC, "end": "(12,34,-1,-1)", "end_error": None}
    assert Busy.asked == 3 and time.monotonic() - t0 < 10


def test_no_broker_answering_within_the_wait_names_each_ones_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "0.05")  # the 60 s wait becomes 3 s
    down = [closed_port_url(), closed_port_url()]
    t0 = time.monotonic()
    got = end_position(TOPIC, down, "eu", None)
    assert got["end"] is None and all(url in (got["end_error"] or "") for url in down), got
    assert 2 <= time.monotonic() - t0 < 10


def test_a_cluster_without_admin_urls_is_said_at_once() -> None:
    assert end_position(TOPIC, [], "us", None)["end_error"] == "no admin URL for cluster us"
