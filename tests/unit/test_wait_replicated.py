"""The playbooks' under-replication wait (``roles/pulsar_node/files/wait_replicated.py``) against a
bookie HTTP API served here: nothing listed passes at once; a ledger closed without entries, or open
with no entry confirmed and every bookie of it registered, that stays listed does not hold the wait
and is named; a ledger with entries (or open with a bookie not back, or an entry confirmed) holds it
until the timeout, which names it with the bookies of each fragment."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests.http_served import Hangups, QuietHandler, served

SCRIPT = Path(__file__).resolve().parents[2] / "playbooks" / "roles" / "pulsar_node" / "files" / "wait_replicated.py"
EU_US = [{"id": "127.0.1.2:3181"}, {"id": "127.0.1.6:3181"}]
EMPTY = {"closed": True, "lastEntryId": -1, "length": 0, "allEnsembles": {"0": EU_US}}
FULL = {"closed": True, "lastEntryId": 41, "length": 9000,
        "allEnsembles": {"0": EU_US, "30": [{"id": "127.0.1.2:3181"}, {"id": "127.0.1.3:3181"}]}}
OPEN_EMPTY = {**EMPTY, "closed": False}


@dataclass
class Bookie:
    """What the served bookie says: listed ledgers' metadata, which ledgers have entry 0 confirmed,
    which bookies are registered (writable / read-only)."""

    url: str
    ledgers: dict[int, dict]
    hangups: Hangups
    confirmed: set[int] = field(default_factory=set)
    writable: set[str] = field(default_factory=lambda: {"127.0.1.2:3181", "127.0.1.3:3181", "127.0.1.6:3181"})
    read_only: set[str] = field(default_factory=set)


@pytest.fixture
def bookie() -> Iterator[Bookie]:
    state = Bookie("", {}, Hangups(0))

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            if state.hangups.hang_up(self):
                return
            url = urlparse(self.path)
            query = parse_qs(url.query)
            ledgers = state.ledgers
            if url.path == "/api/v1/autorecovery/list_under_replicated_ledger":
                status, body = (200, json.dumps(sorted(ledgers))) if ledgers else (404, "No under replicated ledgers found")
            elif url.path == "/api/v1/bookie/list_bookies":
                ids = state.writable if query["type"] == ["rw"] else state.read_only
                status, body = 200, json.dumps(dict.fromkeys(sorted(ids)))
            elif url.path == "/api/v1/ledger/read/":
                lid = int(query["ledger_id"][0])
                assert query["start_entry_id"] == ["0"] and query["end_entry_id"] == ["0"]
                status, body = 200, json.dumps({"0": "payload"} if lid in state.confirmed else {})
            else:
                lid = int(query["ledger_id"][0])
                status, body = (200, json.dumps({str(lid): ledgers[lid]})) if lid in ledgers else (404, "not found")
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body.encode())

    with served(Handler) as url:
        state.url = url
        yield state


def wait(url: str, timeout: float = 0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), url, str(timeout)], capture_output=True, text=True, timeout=60)


def test_nothing_listed_passes(bookie: Bookie) -> None:
    proc = wait(bookie.url)
    assert (proc.returncode, proc.stdout.strip()) == (0, "no ledger is under-replicated")


def test_a_closed_ledger_without_entries_does_not_hold_the_wait_and_is_named(bookie: Bookie) -> None:
    bookie.ledgers[10] = EMPTY
    proc = wait(bookie.url)
    assert proc.returncode == 0, proc.stdout
    assert "still marked, closed without entries (nothing to copy): 10" in proc.stdout


def test_an_open_ledger_with_nothing_confirmed_on_bookies_all_back_does_not_hold_the_wait(bookie: Bookie) -> None:
    """An idle topic's open ledger after a region drill: every bookie of it registered again (one
    read-only counts), no entry confirmed to them. Named beside a closed empty one."""
    bookie.writable.discard("127.0.1.6:3181")
    bookie.read_only.add("127.0.1.6:3181")
    bookie.ledgers.update({10: EMPTY, 11: OPEN_EMPTY})
    proc = wait(bookie.url)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip() == ("no ledger with entries is under-replicated; still marked, closed without entries "
                                   "(nothing to copy): 10; open with no entry confirmed and every bookie of it registered: 11")


@pytest.mark.parametrize("case", ["closed-with-entries", "open-with-an-entry-confirmed", "open-with-a-bookie-not-back"])
def test_a_ledger_that_may_hold_entries_holds_it_and_is_named_with_its_bookies(bookie: Bookie, case: str) -> None:
    meta = FULL if case == "closed-with-entries" else OPEN_EMPTY
    if case == "open-with-an-entry-confirmed":
        bookie.confirmed.add(12)
    if case == "open-with-a-bookie-not-back":
        bookie.writable.discard("127.0.1.6:3181")
    bookie.ledgers.update({10: EMPTY, 12: meta})
    proc = wait(bookie.url)
    assert proc.returncode == 1
    out = proc.stdout
    assert out.startswith("ledgers still under-replicated after 0 s: 12 (") and "10 (" not in out, out
    assert "from entry 0: 127.0.1.2:3181, 127.0.1.6:3181" in out
    if meta is FULL:
        assert "closed, last entry 41" in out and "from entry 30: 127.0.1.2:3181, 127.0.1.3:3181" in out
    else:
        assert "open, last entry -1" in out


def test_an_unreachable_bookie_fails_naming_it() -> None:
    proc = wait("http://127.0.0.1:9", timeout=0)
    assert proc.returncode == 1 and "could not read the under-replicated ledgers from http://127.0.0.1:9" in proc.stdout


def test_a_bookie_that_closes_connections_while_it_restarts_is_asked_again_until_it_answers(bookie: Bookie) -> None:
    """What the local upgrade's gate met right after a bookie's restart: two requests closed
    without a response, then the bookie answers and the wait passes instead of failing the upgrade."""
    url, hangups = bookie.url, bookie.hangups
    hangups.left = 2
    gate = load_script()
    ok, said = gate.wait(url, timeout=10, sleep=0.05)
    assert (ok, said, hangups.left) == (True, "no ledger is under-replicated", 0)
    hangups.left = 1_000
    ok, said = gate.wait(url, timeout=0.3, sleep=0.05)
    assert not ok and said.startswith(f"could not read the under-replicated ledgers from {url} for 0 s: "), said
    assert "Remote end closed connection without response" in said


def load_script():
    spec = importlib.util.spec_from_file_location("wait_replicated_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_assess_sorts_what_is_listed_as_the_wait_and_the_upgrades_first_gate_both_read_it(bookie: Bookie) -> None:
    """One rule for the wait and for ``pulsarlab upgrade``'s check before any node is touched
    (pulsarlab.upgrade.run.under_replicated): at risk, closed empty, open with nothing confirmed."""
    bookie.confirmed.add(13)
    bookie.ledgers.update({10: EMPTY, 11: OPEN_EMPTY, 12: FULL, 13: OPEN_EMPTY})
    at_risk, empty, idle, meta = load_script().assess(bookie.url)
    assert (at_risk, empty, idle, sorted(meta)) == ([12, 13], [10], [11], [10, 11, 12, 13])
