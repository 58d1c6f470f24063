"""A node that stops by itself during a rolling upgrade (a bookie whose auto-recovery lost its
ZooKeeper session while the only ZooKeeper node restarted) is started at once on the target
release, before the next node's gates, and counted as moved at its own turn."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
import yaml

from pulsarlab import timeouts
from pulsarlab.errors import CheckFailed
from pulsarlab.render import bookie_session_s
from pulsarlab.topology import BUILTIN_DIR, Role
from pulsarlab.topology.model import parse
from pulsarlab.upgrade import run
from pulsarlab.upgrade.plan import Step
from pulsarlab.upgrade.run import Moved, await_fallout, outlasted_sessions, start_fallen


class Cluster:
    def __init__(self, down: set[str], reports: str = "4.0.6") -> None:
        self.down, self.reports, self.calls = down, reports, []

    def alive(self, name: str) -> bool:
        return name not in self.down

    def place_node(self, name: str, dist) -> None:
        self.calls.append(("place", name, dist.version))

    def start_group(self, names: list[str]) -> None:
        self.calls.append(("start", tuple(names)))
        self.down -= set(names)

    def reported_versions(self) -> dict[str, tuple[str | None, str]]:
        return {n: (self.reports, "reported") for n in ("bk1", "bk2", "bk3", "pulsar1")}


def steps() -> list[Step]:
    return [Step("bk1", Role.BOOKIE, "4.0.8", "move"), Step("bk2", Role.BOOKIE, "4.0.8", "move"),
            Step("bk3", Role.BOOKIE, "4.0.6", "keep"), Step("pulsar1", Role.BROKER, "4.0.8", "move")]


def say(*_a, **_k) -> None:
    return None


def test_nodes_that_stopped_are_placed_on_the_target_and_started_together() -> None:
    cluster = Cluster({"bk2", "bk3"})
    moved = start_fallen(cluster, SimpleNamespace(version="4.0.6"), steps(), say)  # type: ignore[arg-type]
    # bk3 already runs the target: started again as it is, not placed, not counted as moved
    assert cluster.calls == [("place", "bk2", "4.0.6"), ("start", ("bk2", "bk3"))]
    bk2 = moved["bk2"]
    assert list(moved) == ["bk2"] and (bk2.action, bk2.before, bk2.after) == ("moved", "4.0.8", "4.0.6")
    assert bk2.fell  # the fault's account names it as stopped by itself


def test_nothing_stopped_touches_nothing() -> None:
    cluster = Cluster(set())
    assert start_fallen(cluster, SimpleNamespace(version="4.0.6"), steps(), say) == {}  # type: ignore[arg-type]
    assert cluster.calls == []


def test_a_node_started_on_the_wrong_release_fails_the_upgrade() -> None:
    cluster = Cluster({"bk1"}, reports="4.0.8")
    with pytest.raises(CheckFailed, match="bk1 started again but reports 4.0.8, not 4.0.6"):
        start_fallen(cluster, SimpleNamespace(version="4.0.6"), steps(), say)  # type: ignore[arg-type]


def test_after_the_only_zookeeper_the_upgrade_waits_for_nodes_that_go_down_late() -> None:
    cluster = Cluster(set())
    t0 = time.monotonic()
    threading.Timer(0.6, lambda: cluster.down.add("bk2")).start()  # bk2's session ran out: it stops a moment later
    await_fallout(cluster, steps(), quiet_s=5, grace_s=0.5)  # type: ignore[arg-type]
    assert 1.0 <= time.monotonic() - t0 < 2.5  # its stop seen, then a grace for the others, not the whole 5 s
    cluster.down.clear()
    t0 = time.monotonic()
    await_fallout(cluster, steps(), quiet_s=1, grace_s=0.5)  # type: ignore[arg-type]
    quiet = 1 * timeouts.scale()  # scaled as every wait is
    assert quiet <= time.monotonic() - t0 < quiet + 1.0  # nothing stopped: the quiet time, no more


class Reporter:
    def __call__(self, *_a, **_k) -> None:
        return None

    begin = end = __call__


def test_between_runs_after_every_turn_also_of_a_node_started_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that stops the run after a node's turn stops it there even when that node had stopped
    by itself and was started on the target earlier (it fell with the others at ZooKeeper's restart)."""
    cluster = Cluster(set())
    cluster.topo = SimpleNamespace(nodes_of=lambda role: [])  # type: ignore[attr-defined]
    cluster.stage_release = cluster.record_version = lambda *a, **k: None  # type: ignore[attr-defined]
    order = [Step("bk1", Role.BOOKIE, "4.0.8", "move"), Step("bk2", Role.BOOKIE, "4.0.8", "move"),
             Step("pulsar1", Role.BROKER, "4.0.8", "move")]

    class Mover:
        def __init__(self, *_a) -> None:
            pass

        def run(self, step: Step) -> Moved:
            if step.node == "bk1":
                cluster.down.add("bk2")  # bk2 stops by itself during bk1's turn
            return Moved(step.node, step.role.value, step.running, "4.0.6", "moved")

    monkeypatch.setattr(run, "check_before", lambda *_a: {})
    monkeypatch.setattr(run, "plan", lambda *_a: order)
    monkeypatch.setattr(run, "NodeUpgrade", Mover)
    turns: list[tuple[str, bool]] = []
    result = run.upgrade(cluster, SimpleNamespace(version="4.0.6"), Reporter(), order=object(),  # type: ignore[arg-type]
                         between=lambda moved: turns.append((moved.node, moved.fell)))
    assert turns == [("bk1", False), ("bk2", True), ("pulsar1", False)]
    assert [m.node for m in result.nodes] == ["bk1", "bk2", "pulsar1"]


def _zk_away(seconds: float) -> Moved:
    return Moved("zk", "zookeeper", "4.0.6", "4.0.8", "moved", seconds, away=(0, int(seconds * 1e9)))


def _with_bookie_setting(config: dict) -> SimpleNamespace:
    data = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    return SimpleNamespace(topo=parse(data | {"config": {"bookie": config}} if config else data, True))


def test_the_upgrade_watches_for_fallen_nodes_only_when_zookeeper_outlasted_the_bookies_sessions() -> None:
    rendered = _with_bookie_setting({})  # Pulsar's 30 s, as pulsarlab renders it
    assert bookie_session_s(rendered.topo, rendered.topo.nodes_of(Role.BOOKIE)[0]) == 30.0
    assert not outlasted_sessions(rendered, _zk_away(15.0))  # type: ignore[arg-type]  # a loaded machine's restart
    assert outlasted_sessions(rendered, _zk_away(28.0))  # type: ignore[arg-type]  # within the clients' reconnect slack
    # a topology's own zkTimeout decides: at 10 s the same 15 s restart outlasts it
    short = _with_bookie_setting({"zkTimeout": 10000})
    assert bookie_session_s(short.topo, short.topo.nodes_of(Role.BOOKIE)[0]) == 10.0
    assert outlasted_sessions(short, _zk_away(15.0))  # type: ignore[arg-type]
