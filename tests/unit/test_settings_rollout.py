"""Settings changed on a running deployment: which nodes change, which broker keys go through the
admin API without a restart, and what still counts as the same deployment (no cluster needed)."""

from __future__ import annotations

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
