"""A topology that the playbooks deployed on hosts (``playbooks/deploy.yml``), attached with the
inventory it was deployed from (``configure.yml`` attaches so): pulsarlab acts on its nodes
through Ansible, by running ``playbooks/node.yml`` for them (start, stop, kill, pause, resume,
wipe, log) with that inventory, the way an operator would by hand.

The hosts are machines of their own: whether a node answers is asked over the network (its main
port, its readiness probe), what runs on a host is only known by asking the host, and no packet
filter of this machine stands between them: network faults add their rules to each host's own
filter (``cut`` and ``heal`` of ``node.yml``). pulsarlab
did not deploy these nodes and does not remove them: ``down`` only forgets the attachment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.chaos import netfilter
from pulsarlab.deployment import Say, quiet
from pulsarlab.distribution import Distribution
from pulsarlab.errors import ProcessFailedError, StateError, UsageError
from pulsarlab.render import write_topology
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.external import answers, detach
from pulsarlab.runtime.state import ClusterState, read_record
from pulsarlab.runtime.waits import wait_for
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Topology

SETTINGS_FILE = "ansible-attached.json"
NODE_PLAYBOOK = "node.yml"
CHECKOUT_PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"  # beside the package in a checkout


def ansible_command(name: str) -> str:
    """``ansible-playbook`` or ``ansible-inventory``: the one beside this Python first (a venv that
    is not activated), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        raise StateError(f"{name} is not installed: node control of Ansible hosts runs it (pip install ansible-core)")
    return found


def ansible_env() -> dict[str, str]:
    """This process's environment (the user's connection settings) for an Ansible command; an
    inventory Ansible cannot parse is an error, not an empty one (its default only warns)."""
    return {**os.environ, "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true", "ANSIBLE_NOCOLOR": "1"}


@dataclass(frozen=True)
class Inventory:
    """An inventory file and the playbooks folder (with ``node.yml``) to act on its hosts."""

    path: Path
    playbooks: Path

    @classmethod
    def checked(cls, topo: Topology, inventory: Path, playbooks: Path | None) -> Inventory:
        """The inventory made absolute after checking that it lists every node of ``topo`` as a
        host and that ``playbooks`` holds ``node.yml`` (default: the checkout's ``playbooks/``)."""
        if not inventory.is_file():
            raise UsageError(f"--inventory {inventory}: no such file (the inventory.yml that "
                             "'pulsarlab render --runtime ansible' wrote, or your own)")
        folder = playbooks if playbooks is not None else CHECKOUT_PLAYBOOKS
        if not (folder / NODE_PLAYBOOK).is_file():
            raise UsageError(f"--playbooks {folder}: no {NODE_PLAYBOOK} there (name the folder of pulsarlab's playbooks)")
        cmd = [ansible_command("ansible-inventory"), "-i", str(inventory.resolve()), "--list"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ansible_env())
        try:
            hosts = json.loads(proc.stdout)["_meta"]["hostvars"] if proc.returncode == 0 else None
        except (ValueError, KeyError, TypeError):
            hosts = None
        if not isinstance(hosts, dict):
            raise UsageError(f"--inventory {inventory}: Ansible cannot read it ({(proc.stderr or proc.stdout).strip()[-300:]})")
        missing = [n.name for n in topo.nodes if n.name not in hosts]
        if missing:
            raise UsageError(f"--inventory {inventory}: no host for node(s) {', '.join(missing)} of {topo.name!r} "
                             "(each node is a host of the same name)")
        other = [f"{n.name} has pulsar_role {v.get('pulsar_role')!r}, not {n.role.value!r}"
                 if v.get("pulsar_role") != n.role.value else f"{n.name} has no pulsar_node_dir"
                 for n in topo.nodes if (v := hosts[n.name]).get("pulsar_role") != n.role.value or "pulsar_node_dir" not in v]
        if other:
            raise UsageError(f"--inventory {inventory}: not the inventory these nodes were deployed from ({'; '.join(other)}): "
                             "use the one 'pulsarlab render --runtime ansible' wrote")
        return cls(inventory.resolve(), folder.resolve())


class AnsibleHosts(NodeRuntime):
    """The topology's nodes on the hosts of an Ansible inventory."""

    runtime = "ansible"
    on_loopback = False

    def __init__(self, topo: Topology, state_dir: Path, dist: Distribution | None = None, say: Say = quiet) -> None:
        super().__init__(topo, state_dir, dist, say)
        saved = read_record(self.state_dir / SETTINGS_FILE)
        self.inventory = Inventory(Path(saved.get("inventory", "")), Path(saved.get("playbooks", "")))
        self.paused: set[str] = set(saved.get("paused", []))

    # ----- attach / detach ----------------------------------------------------------------------
    def record(self, inventory: Inventory) -> None:
        """Keep the attachment: the inventory and the playbooks that act on its hosts."""
        self.inventory = inventory
        self._save()
        ClusterState(name=self.topo.name, runtime=self.runtime, topology_ref=self.topo.name,
                     initialized=[c.name for c in self.topo.clusters]).save(self.state_dir)  # deploy.yml did
        write_topology(self.topo, self.state_dir)

    def _save(self) -> None:
        (self.state_dir / SETTINGS_FILE).write_text(json.dumps(
            {"inventory": str(self.inventory.path), "playbooks": str(self.inventory.playbooks),
             "paused": sorted(self.paused)}, indent=2))

    def down(self, keep_data: bool = False) -> list[str]:
        """Remove the packet filter rules faults left on the hosts, then forget the attachment;
        the hosts' nodes keep running."""
        removed, _ = self.remove_host_rules(netfilter.identity(self.state_dir))
        if removed:
            self.say(f"removed {removed} packet filter rule(s) of this deployment from its hosts")
        detach(self.state_dir, keep_data, SETTINGS_FILE)
        self.say(f"detached from {self.topo.name} ({self.inventory.path}); its nodes keep running")
        return []

    # ----- acting through the node playbook -------------------------------------------------------
    def play(self, action: str, names: list[str], **extra: object) -> dict[str, dict]:
        """Run ``node.yml`` with ``action`` for the named nodes; each host's last result. A run
        that fails is a :class:`ProcessFailedError` carrying the command and its output."""
        if not self.inventory.path.is_file():
            raise StateError(f"the inventory this deployment was attached with is gone ({self.inventory.path}): "
                             "attach again with --inventory")
        with tempfile.TemporaryDirectory(prefix="pulsarlab-node-play-") as tree:
            cmd = [ansible_command("ansible-playbook"), "-i", str(self.inventory.path),
                   str(self.inventory.playbooks / NODE_PLAYBOOK), "--limit", ",".join(names),
                   "-e", json.dumps({"pulsar_node_action": action, **extra})]
            env = {**ansible_env(), "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree", "ANSIBLE_CALLBACK_TREE_DIR": tree}
            env.setdefault("ANSIBLE_CONFIG", str(self.inventory.playbooks / "ansible.cfg"))
            try:
                # bounded by its slowest action, a start waiting for each tier in turn (and Ansible's own start)
                limit = sum(timeout(role) for role in ("zookeeper", "bookie", "broker")) + 120
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=self.inventory.playbooks,
                                      timeout=limit)
            except subprocess.TimeoutExpired as exc:
                raise ProcessFailedError(cmd, -1, f"no end after {exc.timeout:.0f}s") from None
            results = {p.name: json.loads(p.read_text()) for p in Path(tree).iterdir()}
            if proc.returncode != 0:
                failed = [f"{host}: {what}" for host, r in sorted(results.items()) if (what := _failure(r))]
                # each host's failure first: a report cut short in its middle still names them
                raise ProcessFailedError(cmd, proc.returncode, "\n".join([*failed, "--- the play's output (its tail):",
                                                                          (proc.stdout + proc.stderr)[-6000:]]))
            return results

    def preflight(self, network: bool = False) -> None:
        """Before faults: every node's host answers, its JVM runs and this connection's user may
        act on it (with ``network``: and change its packet filter); else one error naming each
        host and what is missing."""
        try:
            self.play("check", [n.name for n in self.topo.nodes], pulsar_node_need_iptables=network)
        except ProcessFailedError as exc:
            hosts = {n.name for n in self.topo.nodes}
            named = [line for line in exc.output.splitlines() if line.split(":", 1)[0] in hosts]
            raise StateError("faults cannot act on these hosts: " + "; ".join(named or [exc.output.strip()[-500:]])) from None

    # ----- observations: asked over the network ----------------------------------------------------
    def node_alive(self, name: str) -> bool:
        return answers(self.topo, self.topo.node(name))

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        alive = self.node_alive(name)
        return None, alive, alive and name in self.paused  # paused: as pulsarlab left it

    def traffic_cgroup(self, name: str) -> str | None:
        return None

    def cut_problem(self) -> str | None:
        return None  # each host's own filter (see add_host_rules); preflight checks each has iptables

    # ----- each host's packet filter (deployment.HostFilters) ----------------------------------------
    def controller_address(self, name: str) -> str:
        """The address this machine reaches the node's host from (the source its kernel picks)."""
        address = self.topo.address_of(self.topo.node(name))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect((address, 9))  # a datagram socket's connect sends nothing
                return str(probe.getsockname()[0])
            except OSError as exc:
                raise StateError(f"{name}: no route from this machine to {address} ({exc})") from None

    def add_host_rules(self, rules: dict[str, list[str]]) -> tuple[int, int | None]:
        hosts = sorted(rules)
        given = {h: [r.replace(netfilter.CONTROLLER, self.controller_address(h)) for r in rules[h]] for h in hosts}
        results = self.play("cut", hosts, pulsar_node_rules=given)
        said = [re.search(r"^added: (\d+) at (\d+)\s*$", str(results.get(h, {}).get("stdout", "")), re.M) for h in hosts]
        added = sum(int(m.group(1)) for m in said if m)
        return added, max((int(m.group(2)) for m in said if m), default=None)

    def remove_host_rules(self, tag: str, label: str | None = None) -> tuple[int, int]:
        results = self.play("heal", [n.name for n in self.topo.nodes], pulsar_node_rule_tag=tag,
                            pulsar_node_rule_label=label or "")
        removed = dropped = 0
        for r in results.values():
            if m := re.search(r"^removed: (\d+) dropped: (\d+)", str(r.get("stdout", "")), re.M):
                removed, dropped = removed + int(m.group(1)), dropped + int(m.group(2))
        return removed, dropped

    # ----- primitives ---------------------------------------------------------------------------
    def prepare(self, nodes: list[Node]) -> None:
        return  # deploy.yml wrote every node's files

    def spawn(self, node: Node) -> None:
        self.play("start", [node.name])

    def start_group(self, names: list[str]) -> None:
        """Start the named nodes that are down in one run of the node playbook (ZooKeeper, the
        bookies, the brokers, each waited ready on its host), then probe each from here."""
        nodes = [self.topo.node(n) for n in names]
        todo = [n for n in nodes if not self.alive(n.name)]
        for n in nodes:
            if n not in todo:
                self.say(f"{n.name} is already running")
        if not todo:
            return
        for n in todo:
            self.say.begin(n.name, n.name, "starting")
            self.wait_registration_gone(n)
        self.play("start", [n.name for n in todo])
        for n in todo:
            self.wait_ready(n)
        self.paused -= {n.name for n in todo}
        self._save()

    def stop_process(self, name: str, kill: bool) -> int | None:
        """A kill: when the JVM was killed, by its host's clock (the hosts' clocks kept in step, as
        NTP does, for RTO to mean what it means on one machine)."""
        result = self.play("kill" if kill else "stop", [name]).get(name, {})
        self.paused.discard(name)
        self._save()
        said = re.search(r"^killed: .* at (\d+)\s*$", str(result.get("stdout", "")), re.M) if kill else None
        return int(said.group(1)) if said else None

    def wait_ports_released(self, node: Node) -> None:
        """The host's own ports cannot be bound from here: the node is stopped once its main port
        refuses connections."""
        wait_for(node.name, lambda: (not answers(self.topo, node), "its main port still answers"),
                 what="its main port to refuse connections", timeout=timeout("stop"), interval=0.2)

    def pause_process(self, name: str, paused: bool) -> None:
        self.play("pause" if paused else "resume", [name])
        self.paused.add(name) if paused else self.paused.discard(name)
        self._save()

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        raise StateError(f"cluster {cluster}: the metadata of Ansible hosts is initialised by playbooks/deploy.yml")

    def wipe_data(self) -> None:
        raise StateError("the data of Ansible hosts is theirs: pulsarlab only wipes one stopped node's (disk-loss)")

    def wipe_node(self, node: Node) -> None:
        self.play("wipe", [node.name])

    def log_file(self, name: str) -> Path | None:
        return None  # on its host (see log_tail)

    def log_tail(self, name: str, lines: int = 25) -> str:
        try:
            result = self.play("log", [name], pulsar_node_log_lines=lines).get(name, {})
        except (ProcessFailedError, StateError) as exc:
            return f"(its log could not be read: {str(exc).splitlines()[0]})"
        return "\n".join(result.get("msg") or ["(no log)"])


def _failure(result: dict) -> str:
    """What a host's last result says went wrong ('' when nothing did)."""
    if result.get("unreachable"):
        return f"unreachable ({str(result.get('msg', '')).strip()[:300]})"
    if result.get("failed"):
        return str(result.get("stderr") or result.get("msg") or "failed").strip()[-300:]
    return ""
