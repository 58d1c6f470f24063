"""The order in which a fresh cluster's nodes start (pulsarlab.runtime.base.NodeRuntime.start_nodes),
observed through a runtime whose primitives only record what they are asked: which nodes start in
one spawn, and what is waited for before the next spawn."""

from __future__ import annotations

import threading
from pathlib import Path

from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.topology import Node, Role, load, parse


class Recorder(NodeRuntime):
    runtime = "recorder"

    def __init__(self, topo, state_dir: Path) -> None:
        super().__init__(topo, state_dir)
        self.calls: list[tuple[str, list[str]]] = []
        self.init_args: dict[str, list[str]] = {}

    def prepare(self, nodes: list[Node]) -> None: ...
    def spawn(self, node: Node) -> None: raise AssertionError("every start goes through spawn_all")
    def spawn_all(self, nodes: list[Node]) -> None: self.calls.append(("spawn", [n.name for n in nodes]))
    def stop_process(self, name: str, kill: bool) -> None: ...
    def pause_process(self, name: str, paused: bool) -> None: ...
    def wipe_data(self) -> None: ...
    def wipe_node(self, node: Node) -> None: ...
    def node_alive(self, name: str) -> bool: return False
    def process_info(self, name: str) -> tuple[int | None, bool, bool]: return None, False, False
    def wait_registration_gone(self, node: Node) -> None: ...
    def wait_writable_bookies(self, cluster: str) -> None: ...
    def rack_map_reread(self) -> None: ...

    def wait_ready(self, node: Node) -> float:
        self.calls.append(("ready", [node.name]))
        return 0.0

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        self.calls.append(("init", [cluster]))
        self.init_args[cluster] = args


def test_a_fresh_cluster_spawns_its_brokers_with_its_first_bookie_and_the_other_bookies_once_it_is_ready(
        tmp_path: Path) -> None:
    runtime = Recorder(load("smoke"), tmp_path)
    runtime.start_nodes(list(runtime.topo.nodes))
    spawns = [names for what, names in runtime.calls if what == "spawn"]
    assert spawns == [["zk"], ["pulsar1", "bk1"], ["bk2", "bk3"]], runtime.calls
    # the other bookies only once the first is ready (they would race it for the layout znode)
    assert runtime.calls.index(("ready", ["bk1"])) < runtime.calls.index(("spawn", ["bk2", "bk3"]))
    assert runtime.calls.index(("init", ["smoke"])) < runtime.calls.index(("spawn", ["pulsar1", "bk1"]))


def test_a_cluster_whose_metadata_exists_spawns_every_bookie_with_its_brokers(tmp_path: Path) -> None:
    runtime = Recorder(load("sync"), tmp_path)
    runtime.state.initialized = ["mycluster"]  # a restart: no layout znode to race for
    runtime.start_nodes([n for n in runtime.topo.nodes if n.role.value != "zookeeper"])
    spawns = [names for what, names in runtime.calls if what == "spawn"]
    brokers = [n.name for n in runtime.topo.nodes if n.role.value == "broker"]
    bookies = [n.name for n in runtime.topo.nodes if n.role.value == "bookie"]
    assert spawns == [brokers, bookies], runtime.calls


class LateBrokers(Recorder):
    """The first broker of each cluster is ready at once; the others only after ``configured`` is
    set (or 10 s): a configure that waited for every broker would find them late."""

    def __init__(self, topo, state_dir: Path) -> None:
        super().__init__(topo, state_dir)
        self.configured = threading.Event()
        self.first_brokers = {self.topo.nodes_of(Role.BROKER, c.name)[0].name for c in self.topo.clusters}

    def wait_ready(self, node: Node) -> float:
        if node.role == Role.BROKER and node.name not in self.first_brokers:
            self.configured.wait(10)
        return super().wait_ready(node)


def test_configure_runs_once_one_broker_of_each_cluster_is_ready_while_the_others_start(tmp_path: Path) -> None:
    runtime = LateBrokers(load("geo"), tmp_path)
    seen: list[list[str]] = []

    def configure(c: object) -> None:
        seen.append(sorted(names[0] for what, names in runtime.calls if what == "ready" and names[0].startswith("pulsar")))
        runtime.configured.set()

    runtime.start_nodes(list(runtime.topo.nodes), brokers_ready=configure)
    assert seen == [sorted(runtime.first_brokers)], runtime.calls  # once, with one broker of each cluster ready
    assert all(("ready", [n.name]) in runtime.calls for n in runtime.topo.nodes_of(Role.BROKER))


STREAM_STORAGE = ["--initial-num-stream-storage-containers", "0"]


def _lays_out_stream_storage(args: list[str]) -> bool:
    return not any(args[i:i + 2] == STREAM_STORAGE for i in range(len(args)))


def test_the_metadata_for_stream_storage_is_laid_out_only_where_a_bookie_runs_it(tmp_path: Path) -> None:
    runtime = Recorder(load("geo"), tmp_path)
    runtime.start_nodes(list(runtime.topo.nodes))
    assert set(runtime.init_args) == {"cluster-eu", "cluster-us"}
    assert not any(_lays_out_stream_storage(a) for a in runtime.init_args.values())

    data = load("sync").model_dump(mode="json", exclude_none=True)
    bookie = next(n for n in data["nodes"] if n["name"] == "bk2-us")
    bookie["config"] = {"bookie": {"extraServerComponents":
                                   "org.apache.bookkeeper.stream.server.StreamStorageLifecycleComponent"}}
    runtime = Recorder(parse(data), tmp_path / "with")
    runtime.start_nodes(list(runtime.topo.nodes))
    assert _lays_out_stream_storage(runtime.init_args["mycluster"])
