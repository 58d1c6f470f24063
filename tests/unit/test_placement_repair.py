"""Placement repair (``clusters[].placement_repair_s``): what the bookies' files say, what the
topology refuses, and the scenario that measures it after a region's return."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from pulsarlab.errors import TopologyError
from pulsarlab.render import node_dirs, render_node
from pulsarlab.scenarios.conditions import CONDITIONS
from pulsarlab.scenarios.model import load as load_scenario
from pulsarlab.scenarios.model import misfits
from pulsarlab.scenarios.verdict import judge
from pulsarlab.topology import BUILTIN_DIR, Topology, load, parse
from pulsarlab.topology.model import PLACEMENT_REPAIR_KEYS


def sync(**cluster: object) -> dict:
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    data["clusters"][0].update(cluster)
    return data


def bookie_conf(topo: Topology, name: str, tmp_path: Path) -> dict[str, str]:
    node = topo.node(name)
    text = next(iter(render_node(topo, node, node_dirs(tmp_path, node)).values()))
    pairs = [line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")]
    assert len(pairs) == len(dict(pairs)), "a key set twice"
    return dict(pairs)


def test_the_bookies_check_and_repair_by_racks_one_per_region(tmp_path: Path) -> None:
    conf = bookie_conf(parse(sync(placement_repair_s=30)), "bk2-us", tmp_path)
    assert conf["auditorPeriodicPlacementPolicyCheckInterval"] == "30"
    assert conf["repairedPlacementPolicyNotAdheringBookieEnabled"] == "true"
    # BookKeeper's region-aware policy passes every ledger in this check: the rack-aware one decides
    assert conf["ensemblePlacementPolicy"].endswith(".RackawareEnsemblePlacementPolicy")
    assert (conf["minNumRacksPerWriteQuorum"], conf["enforceMinNumRacksPerWriteQuorum"]) == ("2", "false")
    plain = bookie_conf(load("sync"), "bk2-us", tmp_path)
    assert plain["ensemblePlacementPolicy"].endswith(".RegionAwareEnsemblePlacementPolicy")
    assert not set(PLACEMENT_REPAIR_KEYS) & set(plain)


def test_a_region_of_two_racks_is_refused_naming_why() -> None:
    data = sync(placement_repair_s=30)
    data["nodes"][2]["rack"] = "eu/2"  # bk2-eu
    with pytest.raises(TopologyError, match=r"placement_repair_s.*one rack.*region 'eu' has racks eu/1, eu/2"):
        parse(data)


@pytest.mark.parametrize("where", ["top", "cluster", "node"])
def test_its_keys_set_by_hand_beside_it_are_refused_at_every_level(where: str) -> None:
    data = sync(placement_repair_s=30)
    section = {"bookie": {"auditorPeriodicPlacementPolicyCheckInterval": 5}}
    target = {"top": data, "cluster": data["clusters"][0], "node": data["nodes"][1]}[where]
    target["config"] = copy.deepcopy(section)
    with pytest.raises(TopologyError, match="auditorPeriodicPlacementPolicyCheckInterval is set by .*placement_repair_s"):
        parse(data)
    del data["clusters"][0]["placement_repair_s"]  # alone, the key is the user's to set
    parse(data)


@pytest.mark.parametrize("bad", [0, -5])
def test_a_non_positive_interval_is_refused(bad: int) -> None:
    with pytest.raises(TopologyError, match="placement_repair_s"):
        parse(sync(placement_repair_s=bad))


def test_the_return_scenario_needs_the_repair_on_a_running_deployment() -> None:
    sc = load_scenario("sync-region-return")
    assert sc.topology_model().cluster("mycluster").placement_repair_s
    assert sc.expect.placement == "every_region"
    assert [s.wait for s in sc.schedule if s.wait] == ["missing_copy_in eu", "in_every_region"]
    assert any("placement_repair_s" in p for p in misfits(sc, load("sync")))  # plain sync lacks it
    assert misfits(sc, sc.topology_model()) == []


def test_in_every_region_takes_no_argument() -> None:
    topo = load("sync")
    CONDITIONS["in_every_region"].check_args(topo, [])
    with pytest.raises(ValueError, match="no argument"):
        CONDITIONS["in_every_region"].check_args(topo, ["eu"])


def test_a_wait_shows_where_it_started_and_where_it_ended() -> None:
    sc = load_scenario("sync-region-return")
    wait = {"condition": "in_every_region", "started_s": 31.0, "seconds": 23.5, "held": True,
            "seen": "3 ledger(s), each entry in eu, us", "first_seen": "ledger 12 has entries with no copy in eu"}
    [judged] = [j for j in judge(sc, None, None, [wait]) if j.name == "wait in_every_region"]
    assert judged.actual == ("after 23.5s: at first ledger 12 has entries with no copy in eu; "
                             "at the end 3 ledger(s), each entry in eu, us")
    same = {**wait, "first_seen": wait["seen"]}
    [judged] = [j for j in judge(sc, None, None, [same]) if j.name == "wait in_every_region"]
    assert judged.actual == "after 23.5s: 3 ledger(s), each entry in eu, us"
