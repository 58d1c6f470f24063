"""Settings changed on a running deployment: which nodes change, which broker keys go through the
admin API without a restart, and what still counts as the same deployment (no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from pulsarlab.topology import BUILTIN_DIR, Topology, parse
from pulsarlab.topology.settings import without_settings
from pulsarlab.upgrade.rollout import mark_dynamic, node_changes


def sync(**top: Any) -> dict:
    data = yaml.safe_load((BUILTIN_DIR / "sync.yaml").read_text())
    return {**data, **top}


def changed(data: dict, node: str | None = None, **config: dict) -> Topology:
    data = yaml.safe_load(yaml.safe_dump(data))
    if node is None:
        data["config"] = config
    else:
        data["nodes"] = [{**n, "config": config} if n["name"] == node else n for n in data["nodes"]]
    return parse(data)


def test_only_the_nodes_whose_files_change_are_listed_with_old_and_new() -> None:
    old = parse(sync())
    new = changed(sync(), "bk2-us", bookie={"gcWaitTime": 600000})
    [c] = node_changes(old, new)
    assert (c.node, c.role, [(k.key, k.old, k.new) for k in c.server], c.jvm) == (
        "bk2-us", "bookie", [("gcWaitTime", None, "600000")], [])
    assert c.restart


def test_a_jvm_option_or_heap_change_restarts_the_node() -> None:
    data = sync()
    new = parse({**data, "jvm_options": {"broker": ["-Dlab.x=1"]}})
    changes = node_changes(parse(data), new)
    assert sorted(c.node for c in changes) == ["pulsar1-eu", "pulsar1-us", "pulsar2-eu", "pulsar2-us"]
    assert all(c.restart and c.jvm and not c.server for c in changes)


def test_a_dynamic_key_with_one_value_for_every_broker_needs_no_restart() -> None:
    old = parse(sync())
    new = changed(sync(), None, broker={"brokerDeleteInactiveTopicsEnabled": False, "maxUnackedMessagesPerConsumer": 10})
    changes = node_changes(old, new)
    mark_dynamic(new, changes, {"mycluster": {"brokerDeleteInactiveTopicsEnabled"}})
    for c in changes:
        assert c.dynamic == ["brokerDeleteInactiveTopicsEnabled"]
        assert c.restart  # maxUnackedMessagesPerConsumer is static
    only_dynamic = changed(sync(), None, broker={"brokerDeleteInactiveTopicsEnabled": False})
    changes = node_changes(old, only_dynamic)
    mark_dynamic(only_dynamic, changes, {"mycluster": {"brokerDeleteInactiveTopicsEnabled"}})
    assert len(changes) == 4 and not any(c.restart for c in changes)


def test_a_dynamic_key_set_on_one_broker_alone_restarts_it() -> None:
    # Pulsar keeps a dynamic value per cluster: one broker's own value can only come from its file
    new = changed(sync(), "pulsar1-eu", broker={"brokerDeleteInactiveTopicsEnabled": False})
    [c] = node_changes(parse(sync()), new)
    mark_dynamic(new, [c], {"mycluster": {"brokerDeleteInactiveTopicsEnabled"}})
    assert c.node == "pulsar1-eu" and c.dynamic == [] and c.restart


def test_a_removed_dynamic_key_restarts_the_brokers() -> None:
    old = changed(sync(), None, broker={"brokerDeleteInactiveTopicsEnabled": False})
    changes = node_changes(old, parse(sync()))
    mark_dynamic(parse(sync()), changes, {"mycluster": {"brokerDeleteInactiveTopicsEnabled"}})
    assert changes and all(c.restart and not c.dynamic for c in changes)


def test_settings_are_not_what_makes_a_deployment_another() -> None:
    a = parse(sync()).model_dump(mode="json")
    b = changed(sync(), "bk1-eu", bookie={"gcWaitTime": 1}).model_dump(mode="json")
    assert a != b and without_settings(a) == without_settings(b)
    other = parse({**sync(), "regions": ["eu", "us"], "address_prefix": "127.9"}).model_dump(mode="json")
    assert without_settings(a) != without_settings(other)


def _script():
    from pulsarlab.upgrade.plan import node_script

    return node_script("dynamic_settings")


def _read(tmp_path: Path, started: str | None, now: str, extra: dict[str, str] | None = None) -> dict:
    """What the hosts' ``read`` prints for a broker folder (its admin API replaced by Pulsar's list)."""
    script = _script()
    (tmp_path / "conf").mkdir(parents=True, exist_ok=True)
    (tmp_path / "conf" / "broker.conf").write_text(now)
    if started is not None:
        (tmp_path / "started-conf").mkdir(exist_ok=True)
        (tmp_path / "started-conf" / "broker.conf").write_text(started)
    for name, text in (extra or {}).items():
        (tmp_path / "conf" / name).write_text(text)
    real, script._call = script._call, lambda conf, method, path: ["brokerDeleteInactiveTopicsEnabled"]
    try:
        return script.read(tmp_path)
    finally:
        script._call = real


def test_the_hosts_read_the_keys_changed_since_the_start_a_later_line_winning(tmp_path: Path) -> None:
    started = "a=1\nbrokerDeleteInactiveTopicsEnabled=true\ngone=x\n"
    now = "# a comment\na=1\nbrokerDeleteInactiveTopicsEnabled=true\nbrokerDeleteInactiveTopicsEnabled=false\nnew=y\n"
    got = _read(tmp_path / "b", started, now)
    assert got == {"changed": {"brokerDeleteInactiveTopicsEnabled": "false", "new": "y", "gone": None}, "others": [],
                   "dynamic": ["brokerDeleteInactiveTopicsEnabled"]}
    assert _read(tmp_path / "c", started, started, {"log4j2.yaml": "x"})["others"] == ["log4j2.yaml"]
    assert _read(tmp_path / "d", None, now)["changed"] is None  # started before its files were kept: a restart


def test_the_hosts_plan_sets_a_key_changed_alike_on_every_broker_and_restarts_the_rest() -> None:
    script = _script()
    key = "brokerDeleteInactiveTopicsEnabled"

    def ran(changed: dict | None, others: tuple[str, ...] = ()) -> dict:
        return {"rc": 0, "stdout": json.dumps({"changed": changed, "others": list(others), "dynamic": [key]})}

    def plan(results: dict[str, dict], clusters: dict[str, str] | None = None) -> dict:
        return script.plan(script.readings(clusters or dict.fromkeys(results, "c"), results))

    both = plan({"b1": ran({key: "false"}), "b2": ran({key: "false"})})
    assert both == {"set": {"c": {key: "false"}}, "setter": {"c": "b1"}, "no_restart": ["b1", "b2"]}
    # a static key beside it restarts that broker; the dynamic one is still set for the cluster
    assert plan({"b1": ran({key: "false", "numIOThreads": "3"}), "b2": ran({key: "false"})})["no_restart"] == ["b2"]
    # one broker alone, a broker that could not say, another file changed: no run-time value
    for results in ({"b1": ran({key: "false"}), "b2": {"skipped": True}},
                    {"b1": ran({key: "false"}), "b2": {"rc": 1, "stderr": "connection refused"}},
                    {"b1": ran({key: "false"}), "b2": ran(None)}):
        assert plan(results)["set"] == {}, results
    assert plan({"b1": ran({key: "false"}, ("hosts",)), "b2": ran({key: "false"})})["no_restart"] == ["b2"]
    # a change of comments alone needs no restart; each cluster decides for itself
    assert plan({"b1": ran({}), "b2": {"skipped": True}})["no_restart"] == ["b1"]
    two = plan({"e1": ran({key: "false"}), "u1": ran({key: "true"})}, {"e1": "eu", "u1": "us"})
    assert two["set"] == {"eu": {key: "false"}, "us": {key: "true"}} and two["no_restart"] == ["e1", "u1"]
