"""Rendering: read the files back and check the keys that decide how the cluster behaves."""

from __future__ import annotations

from pathlib import Path

import yaml

from pulsarlab.render import merge_properties, parse_properties, render
from pulsarlab.topology import load


def conf(out: Path, node: str, name: str) -> dict[str, str]:
    return parse_properties((out / "nodes" / node / "conf" / name).read_text())


def test_sync_broker_has_region_awareness_and_read_reordering(tmp_path: Path) -> None:
    render(load("sync"), tmp_path)
    b = conf(tmp_path, "pulsar1-us", "broker.conf")
    assert b["clusterName"] == "mycluster"
    assert b["bookkeeperClientRegionawarePolicyEnabled"] == "true"
    assert b["bookkeeperClientRackawarePolicyEnabled"] == "false"
    assert b["bookkeeperClientReorderReadSequenceEnabled"] == "true"
    assert (b["managedLedgerDefaultEnsembleSize"], b["managedLedgerDefaultWriteQuorum"], b["managedLedgerDefaultAckQuorum"]) == (
        "2", "2", "2")
    assert b["advertisedAddress"] == b["bindAddress"] == "127.0.2.3"
    assert b["metadataStoreUrl"] == "zk:127.0.1.1:2181"
    assert b["functionsWorkerEnabled"] == "false"


def test_bookie_binds_its_own_address_with_region_placement(tmp_path: Path) -> None:
    render(load("sync"), tmp_path)
    k = conf(tmp_path, "bk2-us", "bookkeeper.conf")
    assert k["advertisedAddress"] == k["httpServerHost"] == "127.0.2.2"
    assert k["bookiePort"] == "3181" and k["httpServerEnabled"] == "true"
    assert k["metadataServiceUri"] == "metadata-store:zk:127.0.1.1:2181"
    assert k["ensemblePlacementPolicy"].endswith("RegionAwareEnsemblePlacementPolicy")
    assert k["journalDirectories"] == str((tmp_path / "nodes" / "bk2-us" / "data" / "journal").resolve())


def test_geo_uses_metadata_roots(tmp_path: Path) -> None:
    render(load("geo"), tmp_path)
    b = conf(tmp_path, "pulsar1-us", "broker.conf")
    assert b["clusterName"] == "cluster-us"
    assert b["metadataStoreUrl"] == "zk:127.0.1.1:2181/cluster-us"
    assert b["configurationMetadataStoreUrl"] == "zk:127.0.1.1:2181"
    assert conf(tmp_path, "bk1-us", "bookkeeper.conf")["metadataServiceUri"] == "metadata-store:zk:127.0.1.1:2181/cluster-us"


def test_zookeeper_listens_on_its_address_only(tmp_path: Path) -> None:
    render(load("smoke"), tmp_path)
    z = conf(tmp_path, "zk", "zookeeper.conf")
    assert z["clientPortAddress"] == "127.0.1.1"
    assert z["admin.enableServer"] == "false"
    assert z["metricsProvider.httpHost"] == "127.0.1.1"


def test_log_config_is_valid_yaml(tmp_path: Path) -> None:
    render(load("smoke"), tmp_path)
    data = yaml.safe_load((tmp_path / "nodes" / "bk1" / "conf" / "log4j2.yaml").read_text())
    assert data["Configuration"]["Loggers"]["Root"]["level"] == "info"


def test_rendered_topology_round_trips(tmp_path: Path) -> None:
    render(load("active-active"), tmp_path)
    data = yaml.safe_load((tmp_path / "topology.yaml").read_text())
    assert {c["name"] for c in data["clusters"]} == {"cluster-a", "cluster-b"}


def test_merge_keeps_shipped_keys_and_replaces_ours() -> None:
    base = "# comment\nbookiePort=3181\nkeep=me\n#advertisedAddress=x\n"
    merged = merge_properties(base, {"bookiePort": "4000", "advertisedAddress": "127.0.1.2"}, "ours")
    props = parse_properties(merged)
    assert props == {"bookiePort": "4000", "keep": "me", "advertisedAddress": "127.0.1.2"}
    assert merged.count("bookiePort") == 1
