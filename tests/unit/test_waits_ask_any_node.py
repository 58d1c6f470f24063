"""Waits that ask one of several nodes ask whichever answers, against endpoints served on loopback:
the wait for a cluster's bookies to be registered writable (a bookie that stops while it is waited
for, its metadata session outlasted by a restart of the only ZooKeeper node and its JVM writing a
class archive on its way out, neither stalls the wait nor is waited for) and the wait for a killed
node's registration to expire (a ZooKeeper server that is restarting does not hold it up)."""

from __future__ import annotations

import http.server
import json
import socket
import time
from pathlib import Path

import pytest

from pulsarlab.errors import PulsarlabError
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.topology.model import parse
from tests.http_served import QuietHandler, served


def _closed_port() -> int:
    """A loopback port nothing listens on (a node whose web server is gone)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _registry(writable: list[str], read_only: tuple[str, ...] = ()) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            body = json.dumps({b: b for b in (read_only if "type=ro" in self.path else writable)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    return Handler


class _Cluster(LocalCluster):
    """Process liveness as the test says (the nodes are the served endpoints, not processes)."""

    def __init__(self, *args: object, running: dict[str, bool], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.running = running

    def node_alive(self, name: str) -> bool:
        return self.running.get(name, False)


def _cluster(tmp_path: Path, http_ports: list[int], running: dict[str, bool]) -> _Cluster:
    bookies = [{"name": f"bk{i + 1}", "role": "bookie", "cluster": "c", "region": "r", "address": "127.0.0.1",
                "ports": {"bookie": 3181 + i, "http": port}} for i, port in enumerate(http_ports)]
    topo = parse({
        "name": "t", "regions": ["r"],
        "nodes": [{"name": "zk", "role": "zookeeper", "region": "r"}, *bookies,
                  {"name": "pulsar1", "role": "broker", "cluster": "c", "region": "r"}],
        "clusters": [{"name": "c", "persistence": {"ensemble": 2, "write_quorum": 2, "ack_quorum": 2}}],
    })
    return _Cluster(topo, tmp_path, running=running)


def test_a_running_bookie_that_answers_nothing_is_skipped_for_one_that_answers(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "0.02")  # a wait that stalls fails in 2.4 s
    registered = ["127.0.0.1:3181", "127.0.0.1:3182", "127.0.0.1:3183"]
    with served(_registry(registered)) as url2, served(_registry(registered)) as url3:
        running = {"bk1": True, "bk2": True, "bk3": True}
        # bk1, first of the cluster, runs and is registered, its web server not up (yet, or any more)
        cluster = _cluster(tmp_path, [_closed_port(), _port(url2), _port(url3)], running)
        t0 = time.monotonic()
        cluster.wait_writable_bookies("c")
        assert time.monotonic() - t0 < 2
        running["bk2"] = running["bk3"] = False  # only the silent one runs: nothing can say, the wait fails
        with pytest.raises(PulsarlabError, match="no running bookie of the cluster answers"):
            cluster.wait_writable_bookies("c")


def test_a_running_bookie_never_registered_is_named_with_its_own_log(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait that fails shows the log of the bookie it was missing, not the first bookie's, and
    says that bookie registered read-only."""
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "0.01")
    ids = ["127.0.0.1:3181", "127.0.0.1:3182"]  # bk3 runs, registered read-only
    ro = ("127.0.0.1:3183",)
    with served(_registry(ids, ro)) as url1, served(_registry(ids, ro)) as url2:
        cluster = _cluster(tmp_path, [_port(url1), _port(url2), _closed_port()], {"bk1": True, "bk2": True, "bk3": True})
        for name in ("bk1", "bk3"):
            log = cluster.log_file(name)
            assert log is not None
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(f"{name} says: {'waiting for my old registration to expire' if name == 'bk3' else 'fine'}\n")
        with pytest.raises(PulsarlabError) as failed:
            cluster.wait_writable_bookies("c")
    assert "registered read-only: 127.0.0.1:3183; the log below is bk3's" in str(failed.value)
    assert "bk3 says: waiting for my old registration" in str(failed.value) and "bk1 says" not in str(failed.value)


def test_a_bookie_that_stops_while_waited_for_is_no_longer_waited_for(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSARLAB_TIMEOUT_SCALE", "0.5")
    ids = ["127.0.0.1:3182", "127.0.0.1:3183"]
    with served(_registry(ids)) as url2, served(_registry(ids)) as url3:
        running = {"bk1": True, "bk2": True, "bk3": True}
        cluster = _cluster(tmp_path, [_closed_port(), _port(url2), _port(url3)], running)
        polls = 0
        alive = cluster.node_alive

        def dying(name: str) -> bool:
            nonlocal polls
            if name == "bk1":
                polls += 1
                running["bk1"] = polls < 5  # ends after a few polls
            return alive(name)

        cluster.node_alive = dying  # type: ignore[method-assign]
        t0 = time.monotonic()
        cluster.wait_writable_bookies("c")
        assert polls >= 5 and time.monotonic() - t0 < 10


def test_a_previous_registration_is_asked_of_any_zookeeper_server_that_answers() -> None:
    """A killed node's registration is waited out through whichever ZooKeeper server answers
    (four-letter ``dump``, served on loopback): one restarting does not hold the wait up."""
    import socketserver
    import threading

    from pulsarlab.runtime.waits import RegistrationGone

    ephemerals = ["/ledgers/available/127.0.0.1:3181"]

    class Dump(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(4)
            body = "SessionTracker dump:\nephemeral nodes dump:\nSessions with Ephemerals (1):\n0x1:\n"
            self.request.sendall((body + "".join(f"\t{p}\n" for p in ephemerals)).encode())

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Dump)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        probe = RegistrationGone((("127.0.0.1", _closed_port()), ("127.0.0.1", server.server_address[1])),
                                 "127.0.0.1:3181")
        held, said = probe()
        assert not held and "still registered: /ledgers/available/127.0.0.1:3181" in said
        ephemerals.clear()  # its session expired
        assert probe()[0]
        assert not RegistrationGone((("127.0.0.1", _closed_port()),), "127.0.0.1:3181")()[0]  # nobody answers: not gone
    finally:
        server.shutdown()
        server.server_close()
