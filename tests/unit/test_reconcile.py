"""The reconciler's desired state and diff, placement checks and metrics parsing (no cluster)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from typer.testing import CliRunner

from pulsarlab.admin import metrics, placement, reconcile
from pulsarlab.admin.client import LedgerInfo, parse_ensembles
from pulsarlab.cli import app
from pulsarlab.topology import BUILTIN_DIR, load


def _items(kind: str) -> dict[str, reconcile.Item]:
    topo = load("sync")
    return {i.name: i for i in reconcile.desired_state(topo, "mycluster") if i.kind == kind}


def test_desired_racks_cover_bookies_under_their_ids_and_brokers_under_port_zero() -> None:
    racks = _items("rack")
    assert racks["127.0.1.2:3181"].desired == {"rack": "eu/1", "group": "eu"}  # 127.0.1.1 is zk
    assert racks["127.0.2.2:3181"].desired == {"rack": "us/1", "group": "us"}
    brokers = {k: v.desired["rack"] for k, v in racks.items() if k.endswith(":0")}
    assert brokers == {"127.0.1.4:0": "eu/1", "127.0.1.5:0": "eu/1", "127.0.2.3:0": "us/1", "127.0.2.4:0": "us/1"}
    assert len(racks) == 8


def test_isolation_regexes_match_host_and_host_port_of_the_named_brokers_only() -> None:
    eu = _items("isolation")["ns-is-policy-eu"].desired
    assert eu["secondary"] == [".*"]
    assert eu["auto_failover_policy"]["parameters"] == {"min_limit": "1", "usage_threshold": "100"}
    hosts = ["127.0.1.4", "127.0.1.5:8080", "127.0.2.3", "127.0.1.40", "127.0.114", "127.0.1.4:80x"]
    matched = [h for h in hosts if any(re.fullmatch(rx, h) for rx in eu["primary"])]
    assert matched == ["127.0.1.4", "127.0.1.5:8080"]


def test_diff_reports_only_fields_that_differ_and_compares_lists_as_sets() -> None:
    it = reconcile.Item("c", "namespace", "t/ns", {"replication_clusters": ["a", "b"]},
                        {"replication_clusters": ["b", "a"], "other": 1})
    assert reconcile.diff(it) == []
    it.current = {"replication_clusters": ["a"]}
    [ch] = reconcile.diff(it)
    assert (ch.object, ch.field, ch.current, ch.desired, ch.action) == (
        "namespace t/ns", "replication_clusters", ["a"], ["a", "b"], "update")


def test_diff_create_delete_and_numbers() -> None:
    want = {"bookkeeperEnsemble": 2, "managedLedgerMaxMarkDeleteRate": 0.0}
    assert reconcile.diff(reconcile.Item("c", "persistence", "t/ns", want, {"bookkeeperEnsemble": 2.0,
                                                                           "managedLedgerMaxMarkDeleteRate": 0})) == []
    created = reconcile.diff(reconcile.Item("c", "persistence", "t/ns", want, None))
    assert {c.action for c in created} == {"create"} and len(created) == 2
    [gone] = reconcile.diff(reconcile.Item("c", "rack", "1.2.3.4:6650", None, {"rack": "eu/1", "group": "eu"}))
    assert gone.action == "delete"
    [restart] = reconcile.diff(reconcile.Item("c", "broker-region", "b1", {"region": "eu"}, {"region": "UnknownRegion"}))
    assert restart.action == "restart"


def test_broker_region_is_read_from_the_last_start_in_the_log(tmp_path: Path) -> None:
    class FakeCluster:  # only the log of the contract is read
        def log_file(self, name):
            return tmp_path / f"{name}.log"

    line = ("2026 [t] INFO  org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicyImpl - Initialize rackaware "
            "ensemble placement policy @ <Bookie:{}:0> @ {} : org.apache.X.\n")
    (tmp_path / "b.log").write_text(
        "===== pulsarlab: starting b at x =====\n" + line.format("127.0.0.1", "/default-region/default-rack")
        + "===== pulsarlab: starting b at y =====\n" + line.format("127.0.1.3", "/eu/1"))
    assert reconcile.broker_region_seen(FakeCluster(), type("N", (), {"name": "b"})()) == "eu"
    unknown = line.format("127.0.0.1", "/default-region/default-rack")
    (tmp_path / "b.log").write_text("===== pulsarlab: starting b =====\n" + unknown)
    assert reconcile.broker_region_seen(FakeCluster(), type("N", (), {"name": "b"})()) == "UnknownRegion"


def test_ledger_ensembles_and_region_flags() -> None:
    meta = ("LedgerMetadata{formatVersion=3, ensembleSize=2, writeQuorumSize=2, ackQuorumSize=2, state=OPEN, "
            "ensembles={0=[127.0.1.1:3181, 127.0.2.1:3181], 70=[127.0.1.1:3181, 127.0.1.2:3181]}, customMetadata={a=b}}")
    ens = parse_ensembles(meta)
    assert ens == {0: ["127.0.1.1:3181", "127.0.2.1:3181"], 70: ["127.0.1.1:3181", "127.0.1.2:3181"]}
    regions = {"127.0.1.1": "eu", "127.0.1.2": "eu", "127.0.2.1": "us"}
    led = LedgerInfo(5, 100, 1, ens)
    lp = placement.ledger_placement(led, regions, ["eu", "us"], 2, True, {"127.0.1.1:3181", "127.0.1.2:3181"})
    assert lp.missing_regions == ["us"] and lp.regions == ["eu", "us"] and lp.under_replicated
    ok = placement.ledger_placement(LedgerInfo(6, 1, 1, {0: ens[0]}), regions, ["eu", "us"], 2, True,
                                    {"127.0.1.1:3181", "127.0.2.1:3181"})
    assert ok.missing_regions == [] and not ok.under_replicated
    assert placement.write_sets(["a", "b", "c"], 2) == [["a", "b"], ["b", "c"], ["c", "a"]]


def test_metrics_parse_and_diff() -> None:
    page = "\n".join([
        "# TYPE x counter",
        'bookkeeper_server_ADD_ENTRY_count{success="true", threadPool="ForceWriteThread",thread="0"} 22',
        'bookkeeper_server_ADD_ENTRY_count{success="false", threadPool="ForceWriteThread",thread="0"} 7',
        'bookkeeper_server_READ_ENTRY_count{success="true", threadPool="BookieReadThreadPool",thread="0"} 3',
        'bookkeeper_server_READ_ENTRY_count{success="true", threadPool="BookieReadThreadPool",thread="1"} 4',
        "bookie_WRITE_BYTES 11043",
        "bookie_READ_BYTES 9509",
        'bookkeeper_server_READ_ENTRY_REQUEST_count{success="true"} 99',
    ])
    c = metrics.parse_counters(page)
    assert c == {"added_entries": 22.0, "read_entries": 7.0, "written_bytes": 11043.0, "read_bytes": 9509.0}
    a = metrics.BookieCounters("bk1", "eu", "x:1", 1, 2, 3, 4)
    b = metrics.BookieCounters("bk1", "eu", "x:1", 11, 2, 13, 4)
    [d] = metrics.diff([a], [b])
    assert (d.added_entries, d.read_entries) == (10, 0)
    assert metrics.by_region([d])["eu"]["written_bytes"] == 10


def test_cli_refuses_quorums_that_cannot_span_both_regions(tmp_path: Path) -> None:
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    data["namespaces"][0]["persistence"] = {"ensemble": 2, "write_quorum": 1, "ack_quorum": 1}
    spec = tmp_path / "bad-sync.yaml"
    spec.write_text(yaml.safe_dump(data))
    state = tmp_path / "state"
    result = CliRunner().invoke(app, ["up", "--topology", str(spec), "--state-dir", str(state)])
    assert result.exit_code != 0
    assert "namespaces[0](mytenant/eu).persistence.write_quorum" in result.output
    assert not (state / "state.json").exists()


def test_geo_registers_each_cluster_with_its_urls_and_replicates_world_global_to_both() -> None:
    topo = load("geo")
    shared = {(i.kind, i.name): i.desired for i in reconcile.desired_state(topo, "cluster-eu")}
    assert shared[("cluster", "cluster-us")] == {
        "serviceUrl": "http://127.0.2.3:8080,127.0.2.4:8080",
        "brokerServiceUrl": "pulsar://127.0.2.3:6650,127.0.2.4:6650",
    }
    assert shared[("cluster", "cluster-eu")]["brokerServiceUrl"] == "pulsar://127.0.1.4:6650,127.0.1.5:6650"
    assert shared[("tenant", "world")] == {"allowedClusters": ["cluster-eu", "cluster-us"]}
    assert shared[("namespace", "world/global")] == {"replication_clusters": ["cluster-eu", "cluster-us"]}
    # the configuration store is shared: the second cluster carries no copy of those objects
    assert not [i for i in reconcile.desired_state(topo, "cluster-us", with_shared=False) if i.kind != "rack"]


def test_a_cluster_registration_update_keeps_the_fields_the_topology_does_not_decide() -> None:
    calls: list[tuple[str, dict, bool]] = []

    class Admin:
        def put_cluster(self, name: str, data: dict, create: bool) -> None:
            calls.append((name, data, create))

    item = reconcile.Item("cluster-eu", "cluster", "cluster-us", {"serviceUrl": "http://b:8080"},
                          {"serviceUrl": "http://a:8080", "peerClusterNames": ["x"]})
    assert [c.field for c in reconcile.diff(item)] == ["serviceUrl"]
    reconcile.apply_item(Admin(), item)  # type: ignore[arg-type]
    assert calls == [("cluster-us", {"serviceUrl": "http://b:8080", "peerClusterNames": ["x"]}, False)]


def test_a_namespace_deduplication_is_desired_only_where_the_topology_sets_it() -> None:
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    assert not [i for i in reconcile.desired_state(load("sync"), "mycluster") if i.kind == "deduplication"]
    data["namespaces"][0]["deduplication"] = False
    from pulsarlab.topology import parse

    items = reconcile.desired_state(parse(data), "mycluster")
    [dedup] = [i for i in items if i.kind == "deduplication"]
    assert (dedup.name, dedup.desired) == (data["namespaces"][0]["name"], {"deduplicationEnabled": False})
    # unset on the cluster (Pulsar leaves the key out of the policies until it is set) differs from False
    dedup.current = {"deduplicationEnabled": None}
    assert [(c.field, c.current, c.desired) for c in reconcile.diff(dedup)] == [("deduplicationEnabled", None, False)]
    assert reconcile.ORDER.index("namespace") < reconcile.ORDER.index("deduplication")
