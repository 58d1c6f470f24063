"""The ``placement: every_region`` expectation, judged from what the ledger metadata said."""

from __future__ import annotations

import pytest

from pulsarlab.scenarios.model import ScenarioError, load, parse_scenario
from pulsarlab.scenarios.placement import judged
from pulsarlab.scenarios.verdict import judge
from pulsarlab.verify.model import FAIL, INCONCLUSIVE, PASS

META = "metadata store (via bk1-eu)"


def ledger(n: int, regions: list[str], missing: list[str] = (), source: str = META) -> dict:
    return {"topic": "t", "ledger": n, "entries": 10, "regions": regions, "missing_regions": list(missing),
            "ensembles_from": source}


def test_every_ledger_in_every_region_passes() -> None:
    seen, status = judged({"ledgers": [ledger(1, ["eu", "us"]), ledger(2, ["eu", "us"])], "unread": []})
    assert status == PASS and seen == "2 ledger(s), each entry in eu, us"


def test_a_ledger_without_a_region_fails_naming_it() -> None:
    seen, status = judged({"ledgers": [ledger(1, ["eu", "us"]), ledger(15, ["eu"], ["us"])], "unread": []})
    assert status == FAIL and seen == "ledger 15 has entries with no copy in us"


@pytest.mark.parametrize("seen_data", [
    None,  # never read
    {"ledgers": [], "unread": []},  # no ledger: nothing proven
    {"ledgers": [ledger(1, ["eu", "us"], source="broker internalStats (metadata store down)")],
     "unread": ["t: ledger 1's ensembles came from broker internalStats (metadata store down)"]},
    {"ledgers": [ledger(1, ["eu", "us"])], "unread": ["t-partition-1: its placement could not be read (no broker)"]},
])
def test_missing_or_second_hand_evidence_is_inconclusive_never_a_pass(seen_data) -> None:
    assert judged(seen_data)[1] == INCONCLUSIVE


def test_the_blogs_bookie_losses_expect_it_and_the_verdict_judges_it() -> None:
    for name in ("sync-bookie-loss", "kill-ensemble-bookie"):
        assert load(name).expect.placement == "every_region"
    sc = load("kill-ensemble-bookie")
    [placed] = [j for j in judge(sc, None, None, [], {"ledgers": [ledger(3, ["eu"], ["us"])], "unread": []})
                if j.name == "placement"]
    assert placed.status == FAIL and "ledger 3" in placed.actual
    assert not [j for j in judge(load("sync-region-loss"), None, None, []) if j.name == "placement"]


def test_an_unknown_placement_is_refused_naming_the_field() -> None:
    data = {"name": "x", "topology": "sync", "workload": {"rate": 10, "duration": 5}, "expect": {"placement": "one_region"}}
    with pytest.raises(ScenarioError, match="expect.placement"):
        parse_scenario(data, "x.yaml")
