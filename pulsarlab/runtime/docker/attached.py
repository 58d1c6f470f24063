"""A cluster that plain Docker Compose started (``docker compose -f compose/sync.yml up``) and
pulsarlab attached to, with node control through its Compose project's containers.

pulsarlab did not create these containers and never removes them: a node is stopped, killed,
paused and started again as a container of the project (python-on-whales), its data wiped by
emptying its volume from a throw-away container of the node's own image, and ``down`` only
forgets the attachment. Which project runs the topology's nodes is found at ``attach``
(:func:`find_project`): the containers carry ``org.pulsarlab.node`` labels (``compose/*.yml``
set them), and a candidate project's nodes must listen on the topology's addresses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import psutil
from python_on_whales import Container, DockerClient, DockerException

from pulsarlab.deployment import Say, quiet
from pulsarlab.distribution import Distribution
from pulsarlab.errors import NodeStartError, StateError
from pulsarlab.render import write_topology
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.docker import engine
from pulsarlab.runtime.external import MAIN_PORT, detach
from pulsarlab.runtime.state import ClusterState, read_record
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Topology

SETTINGS_FILE = "compose-attached.json"
NODE_LABEL = "org.pulsarlab.node"
PROJECT_LABEL = "com.docker.compose.project"
DATA_DIR = "/pulsar/data"  # where compose/*.yml mount each node's data volume


@dataclass(frozen=True)
class Found:
    """The Compose project whose containers run the topology's nodes (``project`` None: none, and
    ``why``), and each node's container."""

    project: str | None
    host: str
    containers: dict[str, str]
    why: str = ""


def find_project(topo: Topology, host: str | None = None, project: str | None = None) -> Found:
    """The Compose project on the engine at ``host`` that runs every node of ``topo``: the one
    named, or the only one whose containers carry every node's label and listen on its address."""
    host = host or engine.default_host()
    try:
        docker = engine.client(host)
        listed = docker.container.list(all=True, filters=[("label", NODE_LABEL)])
    except Exception as exc:  # no client, no engine: attached without node control, saying why
        return Found(None, host, {}, f"no Docker engine answers at {host} ({str(exc).splitlines()[0]})")
    by_project: dict[str, dict[str, Container]] = {}
    for c in listed:
        labels = c.config.labels or {}
        if PROJECT_LABEL in labels:
            by_project.setdefault(labels[PROJECT_LABEL], {})[labels[NODE_LABEL]] = c
    wanted = [n.name for n in topo.nodes]
    whole = {p: cs for p, cs in by_project.items() if all(n in cs for n in wanted)}
    if project is not None:
        if project not in by_project:
            return Found(None, host, {}, f"no container of Compose project {project!r} carries a {NODE_LABEL} label")
        if project not in whole:
            missing = [n for n in wanted if n not in by_project[project]]
            return Found(None, host, {}, f"Compose project {project!r} has no container for {', '.join(missing)}")
        chosen = [project]
    else:
        chosen = [p for p, cs in whole.items() if _serves(topo, cs)]
    if len(chosen) != 1:
        why = (f"several Compose projects run these nodes ({', '.join(sorted(chosen))}): name one with --compose-project"
               if chosen else f"no Compose project on {host} runs every node of {topo.name!r} at its address")
        return Found(None, host, {}, why)
    containers = {n: whole[chosen[0]][n].name for n in wanted}
    return Found(chosen[0], host, containers)


def _serves(topo: Topology, containers: dict[str, Container]) -> bool:
    """Whether a running node's process tree listens on its address and main port (the first
    running node of the topology tells; host networking: the sockets are this machine's)."""
    for node in topo.nodes:
        c = containers[node.name]
        if not c.state.running or not c.state.pid:
            continue
        want = (topo.address_of(node), node.port(MAIN_PORT[node.role]))
        try:
            root = psutil.Process(c.state.pid)
            for p in [root, *root.children(recursive=True)]:
                if any(s.status == psutil.CONN_LISTEN and (s.laddr.ip, s.laddr.port) == want
                       for s in p.net_connections(kind="tcp")):
                    return True
        except psutil.Error:
            return False
        return False
    return False


class ComposeAttached(NodeRuntime):
    """The topology's nodes as containers of a Compose project pulsarlab attached to."""

    runtime = "compose"

    def __init__(self, topo: Topology, state_dir: Path, dist: Distribution | None = None, say: Say = quiet) -> None:
        super().__init__(topo, state_dir, dist, say)
        saved = read_record(self.state_dir / SETTINGS_FILE)
        self.project: str = saved.get("project", "")
        self.host: str = saved.get("host") or engine.default_host()
        self.containers: dict[str, str] = saved.get("containers", {})
        self._docker: DockerClient | None = None

    # ----- attach / detach ----------------------------------------------------------------------
    def record(self, found: Found) -> None:
        """Keep the attachment: the project, its engine and each node's container."""
        (self.state_dir / SETTINGS_FILE).write_text(json.dumps(
            {"project": found.project, "host": found.host, "containers": found.containers}, indent=2))
        # the project's own init services created the metadata: nothing here initialises it
        ClusterState(name=self.topo.name, runtime=self.runtime, topology_ref=self.topo.name,
                     initialized=[c.name for c in self.topo.clusters]).save(self.state_dir)
        write_topology(self.topo, self.state_dir)

    def down(self, keep_data: bool = False) -> list[str]:
        """Forget the attachment; the containers keep running (packet filter rules of this
        deployment are removed: no cut outlives it)."""
        from pulsarlab.chaos.netfilter import remove_if_any

        if cut := remove_if_any(self.state_dir):
            self.say(f"removed {cut} packet filter rule(s) of this deployment")
        detach(self.state_dir, keep_data, SETTINGS_FILE)
        self.say(f"detached from {self.topo.name} (Compose project {self.project}); its containers keep running")
        return []

    # ----- the project's containers --------------------------------------------------------------
    @property
    def docker(self) -> DockerClient:
        if self._docker is None:
            self._docker = engine.client(self.host)
        return self._docker

    def _container(self, name: str) -> Container | None:
        ref = self.containers.get(self.topo.node(name).name)
        if ref is None:
            return None
        try:
            return self.docker.container.inspect(ref)
        except DockerException:
            return None

    def _need(self, name: str) -> Container:
        c = self._container(name)
        if c is None:
            raise StateError(f"{name}: its container {self.containers.get(name, '?')} of Compose project {self.project} "
                             "is gone (recreate it with docker compose up)")
        return c

    # ----- primitives ---------------------------------------------------------------------------
    def node_alive(self, name: str) -> bool:
        c = self._container(name)
        return c is not None and bool(c.state.running)

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        c = self._container(name)
        if c is None or not c.state.running:
            return None, False, False
        return c.state.pid, True, bool(c.state.paused)

    def prepare(self, nodes: list[Node]) -> None:
        for n in nodes:
            self._need(n.name)

    def spawn(self, node: Node) -> None:
        try:
            self._need(node.name).start()
        except DockerException as exc:
            raise NodeStartError(node.name, "its container to start", 0, self.log_tail(node.name),
                                 (exc.stderr or str(exc)).strip()[-300:]) from None
        self.say.update(node.name, f"started (container {self.containers[node.name]})")

    def stop_process(self, name: str, kill: bool) -> None:
        c = self._container(name)
        if c is None or not c.state.running:
            return
        if c.state.paused:  # a frozen JVM cannot act on SIGTERM
            c.unpause()
        if kill:  # a kill counts as a stop by hand: a restart policy of unless-stopped leaves it down
            c.kill("SIGKILL")
        else:
            c.stop(time=int(timeout("stop")))

    def pause_process(self, name: str, paused: bool) -> None:
        c = self._need(name)
        c.pause() if paused else c.unpause()

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        raise StateError(f"cluster {cluster}: the metadata of an attached Compose project is initialised by its own "
                         "init service, not by pulsarlab")

    def wipe_data(self) -> None:
        raise StateError(f"the data of Compose project {self.project} is its own: remove it with docker compose down -v")

    def wipe_node(self, node: Node) -> None:
        """Empty the stopped node's data volume from a throw-away container of its own image."""
        c = self._need(node.name)
        volumes = [m.name for m in c.mounts if m.destination == DATA_DIR and m.name]
        if not volumes or not c.config.image:
            raise StateError(f"{node.name}: container {c.name} has no volume at {DATA_DIR} to wipe")
        self.docker.run(c.config.image, ["-c", "rm -rf /wipe/* /wipe/.[!.]* /wipe/..?*"], remove=True,
                        volumes=[(volumes[0], "/wipe")], entrypoint="sh", user="0", networks=["none"])

    def log_file(self, name: str) -> Path | None:
        return None  # the container's own log (see log_tail)

    def log_tail(self, name: str, lines: int = 25) -> str:
        c = self._container(name)
        if c is None:
            return f"(no container for {name})"
        try:
            return str(self.docker.container.logs(c, tail=lines))
        except DockerException as exc:
            return f"(its log could not be read: {str(exc).splitlines()[0]})"
