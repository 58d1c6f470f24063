"""The run id and the run manifest ``_run.json`` as docs/history.md describes them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pulsarlab.history.manifest import DriverOutcome, Manifest, new_run_id, read_manifest


def test_run_ids_name_the_utc_start_and_differ() -> None:
    ids = {new_run_id() for _ in range(50)}
    assert all(re.fullmatch(r"r\d{8}-\d{6}-[0-9a-f]{4}", i) for i in ids)
    assert len(ids) > 40  # 4 hex digits: collisions within one second are rare


def test_manifest_has_the_documented_fields_and_reads_back(tmp_path: Path) -> None:
    m = Manifest("r20261123-131502-4f2a", "persistent://t/eu/pulsarlab-r20261123-131502-4f2a", 0, "mycluster",
                 ["mycluster"], "pulsarlab", started_ts=1)
    m.drivers = [DriverOutcome("p0", "produce", "producer-p0", 0)]
    m.write(tmp_path)
    data = json.loads((tmp_path / "_run.json").read_text())
    assert set(data) == {"format", "run", "topic", "partitions", "cluster", "read_clusters", "subscription", "started_ts",
                         "ended_ts", "finished", "drivers", "consume_cluster", "replication", "ended_early"}
    assert data["replication"] == {} and data["consume_cluster"] is None and data["ended_early"] is None
    assert data["format"] == 1 and data["finished"] is False and data["ended_ts"] is None
    assert data["drivers"] == [{"name": "p0", "mode": "produce", "part": "producer-p0", "exit_code": 0, "failed": False,
                                "reason": None, "counts": None}]
    assert read_manifest(tmp_path) == m
    assert read_manifest(tmp_path / "nowhere") is None
    assert not list(tmp_path.glob(".*"))


def test_geo_manifest_names_the_clusters_each_topic_replicates_to(tmp_path: Path) -> None:
    topic = "persistent://world/global/pulsarlab-r1"
    m = Manifest("r1", topic, 2, "cluster-eu", ["cluster-eu", "cluster-us"], "pulsarlab", consume_cluster="cluster-us",
                 replication={topic: ["cluster-eu", "cluster-us"]})
    m.write(tmp_path)
    data = json.loads((tmp_path / "_run.json").read_text())
    assert data["replication"] == {topic: ["cluster-eu", "cluster-us"]} and data["consume_cluster"] == "cluster-us"
    assert read_manifest(tmp_path) == m
