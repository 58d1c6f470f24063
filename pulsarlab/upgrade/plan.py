"""What a rolling upgrade does, decided before any node is touched: the order and gates (read from
the file ``playbooks/upgrade.yml`` reads too), which nodes move, and why an upgrade is refused.

Pure logic: what the nodes report comes in as data, so every rule here is tested without a cluster.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Literal

import yaml

from pulsarlab.topology import Role, Topology

ORDER_FILE = "upgrade_order.yml"
# what each gate name of the order file means; both paths know exactly these
GATES = {
    "every_node_serving": "every node runs and answers ready, reporting its release",
    "no_underreplicated_ledger": "auto-recovery lists no under-replicated ledger that holds entries",
    "ready": "the node answers ready after its start",
    "raise_recovery_delay": "the cluster's lostBookieRecoveryDelay raised while the bookie restarts",
    "restore_recovery_delay": "lostBookieRecoveryDelay set back to what it was",
    "unload_bundles": "the broker hands the bundles it owns to the other brokers before it stops",
}


def node_files_dir() -> Path:
    """The node role's helper files: in a wheel ``pulsarlab/node_files``, in a checkout beside the playbooks."""
    here = Path(__file__).resolve().parents[1]
    for d in (here / "node_files", here.parent / "playbooks" / "roles" / "pulsar_node" / "files"):
        if (d / ORDER_FILE).is_file():
            return d
    raise FileNotFoundError(f"{ORDER_FILE} is neither in {here / 'node_files'} nor beside the playbooks")


@cache
def node_script(name: str) -> ModuleType:
    """One of the role's helper scripts (standard library only) as a module: the gate code the hosts run."""
    path = node_files_dir() / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"pulsarlab_node_files_{name}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Tier:
    role: Role
    group: str
    before_stop: tuple[str, ...]
    after_start: tuple[str, ...]


@dataclass(frozen=True)
class Order:
    before: tuple[str, ...]
    tiers: tuple[Tier, ...]
    recovery_delay_s: int
    ready_timeout_s: int
    underreplicated_timeout_s: int

    def tier(self, role: Role) -> Tier:
        return next(t for t in self.tiers if t.role == role)


def parse_order(data: dict) -> Order:
    """The order file's ``pulsar_upgrade`` mapping; a gate name that is not known is an error."""
    u = data["pulsar_upgrade"]
    tiers = tuple(Tier(Role(t["role"]), t["group"], tuple(t.get("before_stop") or ()), tuple(t.get("after_start") or ()))
                  for t in u["tiers"])
    order = Order(tuple(u.get("before") or ()), tiers, int(u["recovery_delay_s"]), int(u["ready_timeout_s"]),
                  int(u["underreplicated_timeout_s"]))
    named = {g for t in tiers for g in (*t.before_stop, *t.after_start)} | set(order.before)
    unknown = sorted(named - set(GATES))
    if unknown:
        raise ValueError(f"{ORDER_FILE}: unknown gate(s) {', '.join(unknown)} (known: {', '.join(GATES)})")
    if sorted(t.role for t in tiers) != sorted(Role):
        raise ValueError(f"{ORDER_FILE}: every role once in tiers (got {', '.join(t.role for t in tiers)})")
    return order


@cache
def load_order() -> Order:
    return parse_order(yaml.safe_load((node_files_dir() / ORDER_FILE).read_text()))


@dataclass(frozen=True)
class Step:
    """One node of the plan: ``move`` it from ``running`` to the target, or ``keep`` it (already there)."""

    node: str
    role: Role
    running: str | None
    action: Literal["move", "keep"]


def plan(order: Order, topo: Topology, reported: dict[str, str | None], target: str) -> list[Step]:
    """Every node in the order's tiers (within a tier, the topology's order), moved unless it
    reports running ``target`` already: a second run continues where the first stopped."""
    steps = []
    for tier in order.tiers:
        for node in topo.nodes_of(tier.role):
            running = reported.get(node.name)
            steps.append(Step(node.name, tier.role, running, "keep" if running == target else "move"))
    return steps


def refusals(order: Order, reported: dict[str, str | None], ready: dict[str, bool],
             under_replicated: dict[str, list[int]]) -> list[str]:
    """Why the upgrade must not start (empty: it may): the order's ``before`` gates against what
    the nodes report now. ``under_replicated``: per cluster, the ledgers holding entries listed."""
    problems = []
    if "every_node_serving" in order.before:
        down = [n for n, ok in ready.items() if not ok]
        silent = [n for n, v in reported.items() if v is None and ready.get(n, False)]
        if down:
            problems.append(f"not serving: {', '.join(down)}")
        if silent:
            problems.append(f"no release reported by {', '.join(silent)}")
    if "no_underreplicated_ledger" in order.before:
        for cluster, ledgers in sorted(under_replicated.items()):
            if ledgers:
                problems.append(f"cluster {cluster}: under-replicated ledger(s) {', '.join(map(str, ledgers))}")
    return problems
