"""Server settings from the topology: three levels, every target's files, checked against the
real Pulsar distribution (4.0.8 from the user's cache: its conf/ files and jars, read once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from pulsarlab import distribution
from pulsarlab.ansible.inventory import render_ansible
from pulsarlab.cli import app
from pulsarlab.compose_files import compose_file_text
from pulsarlab.errors import TopologyError
from pulsarlab.render import explain_node, node_dirs, render_node
from pulsarlab.runtime.jvm import pulsar_env
from pulsarlab.settings_catalog import check_topology
from pulsarlab.settings_catalog.catalog import cache_file, load
from pulsarlab.topology import Topology, parse

runner = CliRunner()


def spec(**extra: Any) -> dict[str, Any]:
    """Two clusters (one broker each, a second broker in c1), top-level, cluster and node settings."""
    data: dict[str, Any] = {
        "name": "settings",
        "regions": ["eu"],
        "config": {"broker": {"acknowledgmentAtBatchIndexLevelEnabled": True, "numIOThreads": 3,
                              "maxUnackedMessagesPerConsumer": 1000},
                   "bookie": {"auditorPeriodicPlacementPolicyCheckInterval": 60},
                   "zookeeper": {"tickTime": 2500}},
        "jvm_options": {"broker": ["-Dlab.level=top", "-XX:MaxGCPauseMillis=100"]},
        "nodes": [
            {"name": "zk", "role": "zookeeper", "region": "eu"},
            {"name": "bk1", "role": "bookie", "region": "eu", "cluster": "c1"},
            {"name": "bk2", "role": "bookie", "region": "eu", "cluster": "c2"},
            {"name": "p1", "role": "broker", "region": "eu", "cluster": "c1",
             "config": {"broker": {"numIOThreads": 5}}, "jvm_options": {"broker": ["-Dlab.level=node"]}},
            {"name": "p2", "role": "broker", "region": "eu", "cluster": "c1"},
            {"name": "p3", "role": "broker", "region": "eu", "cluster": "c2"},
        ],
        "clusters": [
            {"name": "c1", "persistence": {"ensemble": 1, "write_quorum": 1, "ack_quorum": 1},
             "config": {"broker": {"numIOThreads": 4, "maxUnackedMessagesPerConsumer": 2000}},
             "jvm_options": {"broker": ["-Dlab.level=cluster"]}},
            {"name": "c2", "persistence": {"ensemble": 1, "write_quorum": 1, "ack_quorum": 1}},
        ],
    }
    data.update(extra)
    return data


@pytest.fixture(scope="module")
def dist() -> distribution.Distribution:
    return distribution.resolve()  # the cached release (.ci/run fetches it ahead)


def problems_of(topo: Topology, dist: distribution.Distribution, warned: list[str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(TopologyError) as exc:
        check_topology(topo, dist.home, dist.version, (warned if warned is not None else []).append)
    return exc.value.problems


def conf_of(topo: Topology, name: str, tmp_path: Path) -> dict[str, str]:
    node = topo.node(name)
    text = next(iter(render_node(topo, node, node_dirs(tmp_path, node)).values()))
    keys = [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert len(keys) == len(set(keys)), "a key set twice in one file"
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_a_node_wins_over_its_cluster_which_wins_over_the_top_level(tmp_path: Path) -> None:
    topo = parse(spec())
    p1, p2, p3 = (conf_of(topo, n, tmp_path) for n in ("p1", "p2", "p3"))
    assert (p1["numIOThreads"], p2["numIOThreads"], p3["numIOThreads"]) == ("5", "4", "3")  # node, cluster, top
    assert (p1["maxUnackedMessagesPerConsumer"], p3["maxUnackedMessagesPerConsumer"]) == ("2000", "1000")
    assert p1["acknowledgmentAtBatchIndexLevelEnabled"] == p3["acknowledgmentAtBatchIndexLevelEnabled"] == "true"
    assert conf_of(topo, "bk1", tmp_path)["auditorPeriodicPlacementPolicyCheckInterval"] == "60"
    assert conf_of(topo, "zk", tmp_path)["tickTime"] == "2500"
    # JVM options the same way, by what each sets: the last -Dlab.level on the command line is the node's
    opts = [pulsar_env(topo, topo.node(n), node_dirs(tmp_path, topo.node(n)))["PULSAR_EXTRA_OPTS"] for n in ("p1", "p2", "p3")]
    assert [[w for w in o.split() if w.startswith("-Dlab.level")] for o in opts] == [
        ["-Dlab.level=node"], ["-Dlab.level=cluster"], ["-Dlab.level=top"]]  # one each: the winner
    assert all("-XX:MaxGCPauseMillis=100" in o for o in opts)
    assert "lab.level" not in pulsar_env(topo, topo.node("bk1"), node_dirs(tmp_path, topo.node("bk1")))["BOOKIE_EXTRA_OPTS"]


def test_every_target_carries_the_settings(tmp_path: Path, dist: distribution.Distribution) -> None:
    topo = parse(spec())
    compose = compose_file_text(topo)  # compose/ files: the overlay each container merges into the shipped file
    assert "numIOThreads=5" in compose and "acknowledgmentAtBatchIndexLevelEnabled=true" in compose
    assert "-Dlab.level=node" in compose
    render_ansible(topo, tmp_path / "hosts", dist.version, dist.conf, artifact=tmp_path / "x.tar.gz")
    broker_conf = (tmp_path / "hosts" / "host_files" / "p2" / "conf" / "broker.conf").read_text()
    assert "\nnumIOThreads=4\n" in broker_conf and broker_conf.count("\nnumIOThreads=") == 1  # the shipped line replaced
    inventory = yaml.safe_load((tmp_path / "hosts" / "inventory.yml").read_text())
    env = inventory["all"]["children"]["brokers"]["hosts"]["p2"]["pulsar_env"]
    assert env["PULSAR_EXTRA_OPTS"].endswith("-Dlab.level=cluster")


def test_explain_names_each_values_origin(dist: distribution.Distribution) -> None:
    rows = {(r.file, r.key): (r.value, r.origin) for r in explain_node(parse(spec()), parse(spec()).node("p1"), dist.conf)}
    assert rows[("broker.conf", "numIOThreads")] == ("5", "node p1")
    assert rows[("broker.conf", "maxUnackedMessagesPerConsumer")] == ("2000", "cluster c1")
    assert rows[("broker.conf", "acknowledgmentAtBatchIndexLevelEnabled")] == ("true", "topology")
    assert rows[("broker.conf", "clusterName")] == ("c1", "pulsarlab")
    assert rows[("broker.conf", "brokerDeleteInactiveTopicsEnabled")][1] == "distribution"
    assert rows[("jvm", "-Dlab.level")] == ("-Dlab.level=node", "node p1")
    assert rows[("jvm", "-XX:MaxGCPauseMillis")] == ("-XX:MaxGCPauseMillis=100", "topology")


def test_render_explain_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(spec()))
    result = runner.invoke(app, ["render", "--topology", str(path), "--explain", "p2", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["key"]: r for r in json.loads(result.stdout)}
    assert rows["numIOThreads"] == {"file": "broker.conf", "key": "numIOThreads", "value": "4", "origin": "cluster c1"}
    missing = runner.invoke(app, ["render", "--topology", str(path), "--explain", "nope"])
    assert missing.exit_code == 2 and "no node 'nope'" in missing.output


def test_an_unknown_broker_key_is_refused_with_the_nearest_names(dist: distribution.Distribution) -> None:
    topo = parse(spec(config={"broker": {"acknowledgmentAtBatchIndexLevelEnable": True}}))
    [(field, rule)] = problems_of(topo, dist)
    assert field == "config.broker.acknowledgmentAtBatchIndexLevelEnable"
    assert "no broker setting" in rule and "did you mean acknowledgmentAtBatchIndexLevelEnabled" in rule


@pytest.mark.parametrize(("key", "value", "why"), [
    ("numIOThreads", "many", "'many' is not an integer"),
    ("acknowledgmentAtBatchIndexLevelEnabled", "yes please", "is not a boolean"),
    ("managedLedgerDefaultMarkDeleteRateLimit", "fast", "is not a number"),
    ("brokerDeleteInactiveTopicsEnabled", [True], "a list, but the field is a single boolean"),
])
def test_a_value_of_the_wrong_type_is_refused(dist: distribution.Distribution, key: str, value: Any, why: str) -> None:
    [(field, rule)] = problems_of(parse(spec(config={"broker": {key: value}})), dist)
    assert field == f"config.broker.{key}" and why in rule


def test_values_of_the_right_type_pass_as_yaml_or_text(dist: distribution.Distribution) -> None:
    topo = parse(spec(config={"broker": {"numIOThreads": "4", "acknowledgmentAtBatchIndexLevelEnabled": "true",
                                         "managedLedgerDefaultMarkDeleteRateLimit": 1, "proxyRoles": ["a", "b"]}}))
    check_topology(topo, dist.home, dist.version, pytest.fail)


def test_keys_pulsarlab_owns_are_refused_with_the_reason(dist: distribution.Distribution) -> None:
    topo = parse(spec(config={"broker": {"advertisedAddress": "10.0.0.1", "managedLedgerDefaultWriteQuorum": 3},
                              "bookie": {"journalDirectories": "/x"}, "zookeeper": {"server.1": "a:2888:3888"}}))
    rules = dict(problems_of(topo, dist))
    assert "nodes[].address" in rules["config.broker.advertisedAddress"]
    assert "clusters[].persistence" in rules["config.broker.managedLedgerDefaultWriteQuorum"]
    assert "its own folder" in rules["config.bookie.journalDirectories"]
    assert "zookeeper nodes" in rules["config.zookeeper.server.1"]


def test_every_problem_is_reported_at_once(dist: distribution.Distribution) -> None:
    data = spec()
    data["nodes"][3]["config"] = {"broker": {"numIOThread": 1}, "bookie": {"x": 1}}  # a broker's bookie section
    data["clusters"][1]["config"] = {"zookeeper": {"tickTime": 1}}
    data["jvm_options"] = {"broker": ["-Xmx2g", "two words"]}
    with pytest.raises(TopologyError) as exc:  # what the model alone sees, all of it
        parse(data)
    assert [f for f, _ in exc.value.problems] == [
        "jvm_options.broker[0]", "jvm_options.broker[1]", "clusters[1](c2).config.zookeeper", "nodes[3](p1).config.bookie"]
    del data["nodes"][3]["config"]["bookie"], data["clusters"][1]["config"], data["jvm_options"]
    data["clusters"][0]["config"]["broker"]["clusterName"] = "x"
    fields = [f for f, _ in problems_of(parse(data), dist)]  # then what the distribution sees, all of it
    assert fields == ["clusters[0](c1).config.broker.clusterName", "nodes[3](p1).config.broker.numIOThread"]


def test_bookkeeper_keys_no_file_lists_are_checked_by_the_classes_or_warned(dist: distribution.Distribution) -> None:
    # the auditor's placement check is a ServerConfiguration constant, absent from the shipped bookkeeper.conf
    catalog = load(dist.home, dist.version)
    assert "auditorPeriodicPlacementPolicyCheckInterval" not in catalog.roles["bookie"].shipped
    warned: list[str] = []
    topo = parse(spec(config={"bookie": {"auditorPeriodicPlacementPolicyCheckInterval": 60,
                                         "myPluginSetting": "on"}, "zookeeper": {"tickTim": 2000}}))
    check_topology(topo, dist.home, dist.version, warned.append)
    assert len(warned) == 2
    assert "'myPluginSetting'" in warned[0] and "rendered as given" in warned[0]
    assert "did you mean tickTime" in warned[1]


def test_bookkeeper_and_zookeeper_values_are_checked_against_the_shipped_defaults_type(
        dist: distribution.Distribution) -> None:
    """No class field tells a bookie's or ZooKeeper's key type; a boolean or number default does."""
    bookie = load(dist.home, dist.version).roles["bookie"]
    assert (bookie.shipped["forceAllowCompaction"], bookie.types["forceAllowCompaction"]) == ("true", "boolean")
    assert bookie.types["flushInterval"] == "number" and bookie.types["ledgerStorageClass"] is None  # text: anything
    topo = parse(spec(config={"bookie": {"forceAllowCompaction": "yes", "gcWaitTime": "15min", "flushInterval": "60000",
                                         "ledgerStorageClass": "org.example.Storage"},
                              "zookeeper": {"tickTime": "2s", "autopurge.purgeInterval": 24}}))
    rules = dict(problems_of(topo, dist))
    assert rules == {"config.bookie.forceAllowCompaction": "'yes' is not a boolean",
                     "config.bookie.gcWaitTime": "'15min' is not a number",
                     "config.zookeeper.tickTime": "'2s' is not a number"}, rules


def test_the_catalog_is_read_from_the_release_once_and_cached(dist: distribution.Distribution) -> None:
    catalog = load(dist.home, dist.version)
    assert cache_file(dist.home, dist.version).is_file()
    broker = catalog.roles["broker"].types  # ServiceConfiguration's fields and their Java types
    assert broker["acknowledgmentAtBatchIndexLevelEnabled"] == "boolean"
    assert broker["numIOThreads"] == "integer" and broker["superUserRoles"] == "list"
    assert broker["brokerServicePort"] == "integer"  # an Optional<Integer>
    assert len(broker) > 500


def test_validate_checks_the_settings_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(spec(config={"broker": {"numIOThreads": "x"}})))
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2 and "config.broker.numIOThreads" in result.output


# the keys pulsarlab's templates set that a topology may override: its defaults for a small machine
TUNED = {
    "broker": {"brokerShutdownTimeoutMs", "enableReplicatedSubscriptions", "functionsWorkerEnabled",
               "loadBalancerOverrideBrokerNicSpeedGbps", "managedLedgerCacheEvictionIntervalMs", "managedLedgerCacheSizeMB",
               "metadataStoreBatchingEnabled", "metadataStoreSessionTimeoutMillis",
               "numExecutorThreadPoolSize", "numHttpServerThreads", "numIOThreads", "tlsAllowInsecureConnection",
               "tlsRequireTrustedClientCertOnConnect", "webSocketServiceEnabled"},
    "bookie": {"autoRecoveryDaemonEnabled", "dbStorage_readAheadCacheMaxSizeMb", "dbStorage_rocksDB_blockCacheSize",
               "dbStorage_writeCacheMaxSizeMb", "diskUsageLwmThreshold", "diskUsageThreshold", "diskUsageWarnThreshold",
               "lockReleaseOfFailedLedgerGracePeriod", "lostBookieRecoveryDelay", "zkTimeout"},
    "zookeeper": set(),
}


@pytest.mark.parametrize("builtin", ["smoke", "sync"])
def test_every_key_the_templates_set_is_owned_or_a_tunable_default(tmp_path: Path, builtin: str,
                                                                     dist: distribution.Distribution) -> None:
    # a key added to templates/ must be decided: pulsarlab's own (refused, with the reason) or a default one may override
    from pulsarlab.render import parse_properties
    from pulsarlab.settings_catalog import OWNED
    from pulsarlab.topology import Security
    from pulsarlab.topology import load as load_builtin

    topo = load_builtin(builtin)
    topo.security = Security()  # the secure profile's keys too
    for node in topo.nodes:
        text = next(iter(render_node(topo, node, node_dirs(tmp_path, node)).values()))
        role = node.role.value
        assert set(parse_properties(text)) - set(OWNED[role]) <= TUNED[role], node.name
    catalog = load(dist.home, dist.version)
    for role, owned in OWNED.items():  # and every owned key is one the release knows (no typo in the list)
        assert [k for k in owned if k not in catalog.roles[role].types and not k.startswith("metricsProvider.")] == []


@pytest.mark.parametrize(("option", "key"), [
    ("-Dmy.property=1", "-Dmy.property"), ("-XX:+UseNUMA", "-XX:UseNUMA"), ("-XX:-UseNUMA", "-XX:UseNUMA"),
    ("-XX:MaxGCPauseMillis=50", "-XX:MaxGCPauseMillis"), ("-Xss512k", "-Xss"),
    ("--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.nio=ALL-UNNAMED"),  # may repeat
    ("-Xlog:gc", "-Xlog:gc"),
])
def test_a_jvm_option_replaces_one_that_sets_the_same_thing(option: str, key: str) -> None:
    from pulsarlab.topology.settings import jvm_option_key

    assert jvm_option_key(option) == key


def test_up_refuses_a_mistyped_setting_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(spec(config={"broker": {"numIOThreads": "many"}}, address_prefix="127.61")))
    result = runner.invoke(app, ["up", "--topology", str(path), "--state-dir", str(tmp_path / "state")])
    assert result.exit_code == 2 and "config.broker.numIOThreads: 'many' is not an integer" in result.output
    assert not (tmp_path / "state" / "nodes").exists()


def test_validate_checks_a_scenarios_topology_settings_too(tmp_path: Path) -> None:
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(spec(config={"broker": {"numIOThread": 2}})))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"name": "s", "topology": str(topo), "workload": {"duration": 5}}))
    result = runner.invoke(app, ["validate", str(scenario)])
    assert result.exit_code == 2 and "did you mean numIOThreads" in result.output, result.output
