"""``up --bind ADDRESS``: the one broker of a topology moves to ADDRESS at its usual ports (where
client suites look for ``pulsar standalone``); every other node keeps its address; a topology with
several brokers, a non-loopback or a malformed address is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.errors import TopologyError
from pulsarlab.topology import bound_to, load


def test_the_broker_moves_and_nothing_else() -> None:
    smoke = load("smoke")
    bound = bound_to(smoke, "localhost")
    assert bound.service_url("smoke") == "pulsar://127.0.0.1:6650" and bound.web_url("smoke") == "http://127.0.0.1:8080"
    others = [n.name for n in smoke.nodes if n.role != "broker"]
    assert [bound.address_of(bound.node(n)) for n in others] == [smoke.address_of(smoke.node(n)) for n in others]
    assert smoke.node("pulsar1").address is None  # the topology given is left as it was


@pytest.mark.parametrize(("address", "why"), [
    ("10.1.2.3", "10.1.2.3 is not a loopback address"),
    ("not-an-ip", "not an IP address: 'not-an-ip'"),
])
def test_a_bad_address_is_refused(address: str, why: str) -> None:
    with pytest.raises(TopologyError, match=why):
        bound_to(load("smoke"), address)


def test_several_brokers_cannot_share_one_address() -> None:
    with pytest.raises(TopologyError, match="'sync' has 4 brokers"):
        bound_to(load("sync"), "127.0.0.1")


def test_the_cli_refuses_before_anything_starts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = CliRunner().invoke(app, ["up", "--topology", "sync", "--bind", "127.0.0.1", "--state-dir", str(state)])
    assert result.exit_code == 2, result.output
    assert "--bind puts the one broker of a topology on an address; 'sync' has 4 brokers" in result.output
    assert not state.exists()
