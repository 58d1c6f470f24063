"""The docker runtime: every node is a container of one compose project per deployment.

What all runtimes share (start order, readiness, up/down bookkeeping) is in
:mod:`pulsarlab.runtime.base`; this module maps its primitives onto compose calls through
python-on-whales. Only containers and volumes of this deployment's project are ever touched.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Literal

import psutil
from python_on_whales import Container, DockerClient, DockerException
from python_on_whales.exceptions import NoSuchContainer
from python_on_whales.utils import run

from pulsarlab.classdata import ClassArchives
from pulsarlab.deployment import Say, quiet
from pulsarlab.distribution import Distribution
from pulsarlab.errors import ImageMissingError, NodeStartError, ProcessFailedError, StateError
from pulsarlab.identity import state_digest
from pulsarlab.runtime import versions
from pulsarlab.runtime.base import NodeRuntime
from pulsarlab.runtime.cds import drop_gone_images, image_archives
from pulsarlab.runtime.docker import compose, engine
from pulsarlab.runtime.docker.image import default_tag, ensure_image
from pulsarlab.runtime.state import read_record
from pulsarlab.runtime.waits import log_tail
from pulsarlab.timeouts import timeout
from pulsarlab.topology import Node, Role, Topology

SETTINGS_FILE = "docker.json"


class DockerCluster(NodeRuntime):
    """A topology run as the containers of one compose project under ``state_dir``."""

    runtime = "docker"

    def __init__(self, topo: Topology, state_dir: Path, dist: Distribution | None = None, say: Say = quiet,
                 image: str | None = None, host: str | None = None, build: bool = True):
        super().__init__(topo, state_dir, dist, say)
        self.build = build  # build pulsarlab's own image on first use (as Compose builds a missing one)
        saved = self._settings()
        self.image = image or saved.get("image")
        self.host = host or saved.get("host") or engine.default_host()
        self.project = compose.project_name(topo, self.state_dir)
        self._docker: DockerClient | None = None
        self._inits: dict[str, psutil.Process] = {}  # node -> its container's init (see _note_init)
        self._image_ids: dict[str, str] = {}  # tag -> image id (see _image_id)

    # ----- the engine and the project -----------------------------------------------------------
    def _settings(self) -> dict:
        path = self.state_dir / SETTINGS_FILE
        return read_record(path)

    @property
    def compose_file(self) -> Path:
        return self.state_dir / compose.COMPOSE_FILE

    @property
    def docker(self) -> DockerClient:
        """A client bound to this project; the engine and the compose plugin are checked once."""
        if self._docker is None:
            self._docker = engine.client(self.host, compose=True, compose_files=[self.compose_file],
                                         compose_project_name=self.project)
        return self._docker

    def container_name(self, name: str) -> str:
        return f"{self.project}-{self.topo.node(name).name}"

    def _container(self, name: str) -> Container | None:
        try:
            c = self.docker.container.inspect(self.container_name(name))
        except DockerException:
            return None
        self._note_init(name, c)
        return c

    def _note_init(self, name: str, c: Container) -> None:
        self._note_process(name, c.id, c.state.pid if c.state.running else None)

    def _note_process(self, name: str, container_id: str, pid: int | None) -> None:
        """Remember a running container's init process (``pid``) when this machine sees it as the
        container's (the engine runs here: its cgroup names the container), so that liveness,
        polled by every readiness wait, is a look at that process instead of an engine call."""
        self._inits.pop(name, None)
        if not pid:
            return
        try:
            proc = psutil.Process(pid)
            if container_id in Path(f"/proc/{proc.pid}/cgroup").read_text():
                self._inits[name] = proc
        except (psutil.Error, OSError):
            pass  # an engine in another machine or namespace: asked each time

    def _init_running(self, name: str) -> bool:
        proc = self._inits.get(name)
        try:
            return proc is not None and proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    # ----- primitives ---------------------------------------------------------------------------
    def before_start(self) -> None:
        """The engine, the compose plugin and the image, before anything is written: pulsarlab's
        own image (the default tag) is built when missing, its progress shown, unless ``build`` is
        off; an image named with ``--image`` must be there. Otherwise one clear error."""
        dist = self.distribution()
        own = default_tag(dist.version)
        self.image = self.image or own
        self.docker  # noqa: B018 - checks client, engine and compose plugin
        if self.image == own and self.build and self._image_id(own) is None:
            with self.say.step("image", f"image {own}", "building (first use: Debian, its Java 17, the distribution)",
                               "built"):
                ensure_image(dist.version, dist.home, own, self.host, say=self.say)
            self._image_ids.pop(own, None)
        if self._image_id(self.image) is None:
            raise ImageMissingError(self.image, self.host)

    def prepare(self, nodes: list[Node]) -> None:
        """The compose file and every node's configuration (after :meth:`before_start`); a node an
        upgrade stopped half-way moved keeps its own release (its image and files)."""
        self.image = self.image or default_tag(self.distribution().version)
        moved = self.node_images()
        compose.render_compose(self.topo, self.state_dir, self.image, self.distribution().conf, self.project, moved,
                               self._class_sharing(moved))
        for name in moved:
            compose.write_node_files(self.topo, self.state_dir, self.topo.node(name), self.node_distribution(name).conf)
        self._save_settings()
        self.say(f"compose project {self.project} ({self.image}, {self.compose_file})")

    def node_images(self) -> dict[str, str]:
        """The nodes that run another image than the deployment's (moved by an upgrade not finished):
        pulsarlab's image of the release the state records for each."""
        return {name: default_tag(self.node_distribution(name).version) for name in self.state.node_distributions}

    def _save_settings(self) -> None:
        (self.state_dir / SETTINGS_FILE).write_text(
            json.dumps({"image": self.image, "host": self.host, "project": self.project}, indent=2))

    # ----- versions: an upgrade moves one container at a time onto another release's image -------
    def stage_release(self, dist: Distribution) -> None:
        """pulsarlab's image of ``dist`` built now, before the upgrade stops any node (a build is
        minutes on a fresh engine); refused when it is missing and building is off."""
        tag = default_tag(dist.version)
        if self.build:
            with self.say.step("image", f"image {tag}", "building if missing", "ready"):
                ensure_image(dist.version, dist.home, tag, self.host, say=self.say)
        self._image_ids[tag] = engine.require_image(tag, self.docker)

    def place_node(self, name: str, dist: Distribution) -> None:
        """The stopped node's service on pulsarlab's image of ``dist``, its files written over that
        distribution's ``conf/``; its data volume stays. The next start recreates its container."""
        node = self.topo.node(name)
        tag = default_tag(dist.version)
        self._image_ids[tag] = engine.require_image(tag, self.docker)  # built by stage_release before any stop
        compose.write_node_files(self.topo, self.state_dir, node, dist.conf)
        self._change_state(lambda state: state.node_distributions.__setitem__(name, str(dist.home)))
        moved = self.node_images()
        compose.write_compose_file(self.topo, self.state_dir, self.image or default_tag(self.distribution().version),
                                   self.project, moved, self._class_sharing(moved))

    def record_version(self, version: str, dist: Distribution | None, done: bool) -> None:
        super().record_version(version, dist, done)
        if done and dist is not None:  # every node on it: its image is the deployment's now
            self.image = default_tag(dist.version)
            compose.write_compose_file(self.topo, self.state_dir, self.image, self.project, cds=self._class_sharing({}))
            self._save_settings()

    # ----- class-data sharing (pulsarlab.runtime.cds): each image's archives, mounted into its nodes
    def _archives(self, tag: str) -> ClassArchives | None:
        image_id = self._image_id(tag)
        if image_id is None:
            return None  # not built (yet): its nodes start without an archive
        archives = image_archives(image_id)
        if not archives.root.is_dir():  # a new image: the folders of those the engine dropped go
            drop_gone_images({i.id for i in self.docker.image.list()})
        (archives.root / "classpath").mkdir(parents=True, exist_ok=True)
        return archives

    def _image_id(self, tag: str) -> str | None:
        """The id of the image ``tag`` names, asked of the engine once per deployment object (an
        image this object builds is asked again)."""
        if tag not in self._image_ids:
            try:
                self._image_ids[tag] = self.docker.image.inspect(tag).id
            except DockerException:
                return None
        return self._image_ids[tag]

    def _recording_name(self, kind: str, owner: str) -> str:
        return f"{kind}.{owner}.{state_digest(self.state_dir)}.jsa.part"

    def _class_sharing(self, node_images: dict[str, str]) -> compose.ClassSharing | None:
        """The archive folder of every image the deployment runs and who records: the first node of
        each role, and each cluster's metadata initialisation."""
        if not self.topo.jvm.class_sharing:
            return None
        tags = {self.image or default_tag(self.distribution().version), *node_images.values()}
        folders = {tag: a.root for tag in tags if (a := self._archives(tag)) is not None}
        recordings = {nodes[0].name: self._recording_name(role.value, nodes[0].name)
                      for role in Role if (nodes := self.topo.nodes_of(role))}
        recordings.update({f"init-{c.name}": self._recording_name("init", c.name) for c in self.topo.clusters})
        return compose.ClassSharing(folders, recordings)

    def _settle_recording(self, name: str, kind: str, image: str, clean: bool) -> None:
        """Promote what the JVM recorded if it exited by itself, else drop it."""
        archives = self._archives(image) if self.topo.jvm.class_sharing else None
        if archives is not None:
            archives.settle(kind, archives.root / self._recording_name(kind, name), clean)

    def jvm_command_line(self, name: str) -> list[str] | None:
        jvm = self._jvm(name)
        try:
            return jvm.cmdline() if jvm is not None else None
        except psutil.Error:
            return None

    def reported_version(self, node: Node) -> versions.Reported:
        """A bookie's release from its JVM's class path, read inside its container's file system."""
        if node.role != Role.BOOKIE:
            return super().reported_version(node)
        jvm = self._jvm(node.name)
        if jvm is None:
            return versions.Reported(None, versions.BOOKIE_SOURCE, "no process")
        try:
            return versions.from_command_line(jvm.cmdline(), root=Path(f"/proc/{jvm.pid}/root"))
        except psutil.Error as exc:
            return versions.Reported(None, versions.BOOKIE_SOURCE, type(exc).__name__)

    def _jvm(self, name: str) -> psutil.Process | None:
        """The node's JVM: the java process under the container's init."""
        c = self._container(name)
        if c is None or not c.state.running or not c.state.pid:
            return None
        try:
            top = psutil.Process(c.state.pid)
            return next((p for p in [top, *top.children(recursive=True)] if p.name() == "java"), None)
        except psutil.Error:
            return None

    def spawn(self, node: Node) -> None:
        """Create (or re-start) the node's container; readiness is the caller's to wait for."""
        self.spawn_all([node])

    def spawn_all(self, nodes: list[Node]) -> None:
        """The nodes' containers created (or re-started) by one ``compose up``: each call costs the
        Compose CLI's own start and a read of the project, so a tier starts in one."""
        logs = {n.name: self.dirs(n).log_file for n in nodes}
        for name, log in logs.items():
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a") as fh:
                fh.write(f"\n===== pulsarlab: starting {name} (container {self.container_name(name)}) "
                         f"at {time.ctime()} =====\n")
        try:
            self.docker.compose.up(list(logs), detach=True, dependencies=False, quiet=True, pull="never")
        except DockerException as exc:
            first = next(iter(logs))
            raise NodeStartError(", ".join(logs), "its container to start" if len(logs) == 1 else "their containers to start",
                                 0, log_tail(logs[first]), _last(exc)) from None
        for node, pid in zip(nodes, self._started_pids([n.name for n in nodes]), strict=True):
            self.say.update(node.name, f"started (container {self.container_name(node.name)}, "
                            f"pid {pid or '?'}, {self.topo.address_of(node)})")

    def _started_pids(self, names: list[str]) -> list[int | None]:
        """The init pid of each node's container by one ``docker container inspect`` of them all
        (python-on-whales asks once per container, and again on each attribute read)."""
        try:
            out = run([*self.docker.client_config.docker_cmd, "container", "inspect",
                       *(self.container_name(n) for n in names)])
            found = json.loads(out if isinstance(out, str) else out[0])
        except (DockerException, json.JSONDecodeError):
            return [None] * len(names)
        by_name = {str(c.get("Name", "")).lstrip("/"): c for c in found}
        pids: list[int | None] = []
        for name in names:
            c = by_name.get(self.container_name(name), {})
            pid = c.get("State", {}).get("Pid") if c.get("State", {}).get("Running") else None
            self._note_process(name, str(c.get("Id", "")), pid)
            pids.append(pid)
        return pids

    def running_nodes(self) -> set[str]:
        """One look at the project's containers instead of one per node."""
        try:
            containers = self.docker.container.list(all=True, filters=self._ours())
        except DockerException:
            return super().running_nodes()
        by_name = {c.name: c for c in containers}
        running = set()
        for node in self.topo.nodes:
            c = by_name.get(self.container_name(node.name))
            if c is not None and c.state.running:
                self._note_init(node.name, c)
                running.add(node.name)
        return running

    def node_alive(self, name: str) -> bool:
        if self._init_running(name):
            return True
        c = self._container(name)
        return c is not None and bool(c.state.running)

    def process_info(self, name: str) -> tuple[int | None, bool, bool]:
        c = self._container(name)
        alive = c is not None and bool(c.state.running)
        if c is None or not alive:
            return None, False, False
        return c.state.pid, True, bool(c.state.paused)

    def stop_process(self, name: str, kill: bool) -> None:
        c = self._container(name)
        if c is None or not c.state.running:
            return
        if c.state.paused:  # a frozen JVM cannot act on SIGTERM
            self.docker.compose.unpause([name])
        if kill:
            self.docker.compose.kill([name], signal="SIGKILL")
        else:
            self.docker.compose.stop([name], timeout=int(timeout("stop")))
        after = self._container(name)
        code = after.state.exit_code if after is not None else None
        # a JVM that ran its shutdown on SIGTERM exits 143; the engine's SIGKILL after the grace: 137
        clean = not kill and code in (0, 143) and not (after is not None and after.state.oom_killed)
        if c.config.image:
            self._settle_recording(name, self.topo.node(name).role.value, c.config.image, clean)

    def pause_process(self, name: str, paused: bool) -> None:
        (self.docker.compose.pause if paused else self.docker.compose.unpause)([name])

    def run_metadata_init(self, cluster: str, args: list[str], log_path: Path) -> None:
        """``initialize-cluster-metadata`` in a one-off container of the project's init service, its
        output in ``log_path`` (which must be in ``<state>/logs``: that folder is what it mounts)."""
        if log_path.parent.resolve() != (self.state_dir / "logs").resolve():
            raise StateError(f"the docker runtime writes init logs to {self.state_dir / 'logs'}, not {log_path.parent}")
        log_path.write_text("")
        cmd = ["initialize-cluster-metadata", *args]
        image = self.image or default_tag(self.distribution().version)
        cds = self._class_sharing({})
        inner = compose.log_command(cmd, f"{compose.CONTAINER.logs}/{log_path.name}",
                                    cds.choice(f"init-{cluster}", "init") if cds is not None and image in cds.folders else "")
        name = f"{self.project}-init-{cluster}"
        limit = timeout("init")
        try:
            self.docker.compose.run(compose.INIT_SERVICE, inner, detach=True, name=name, tty=False,
                                        dependencies=False)
            rc = self._exit_code(name, limit)
            if rc is None:
                raise NodeStartError(f"init-{cluster}", "initialize-cluster-metadata to finish", limit,
                                     log_tail(log_path))
        finally:
            with contextlib.suppress(NoSuchContainer):  # one call, not a look first
                self.docker.container.remove(name, force=True)
        self._settle_recording(cluster, "init", image, rc == 0)
        if rc != 0:
            raise ProcessFailedError(["bin/pulsar", *cmd], rc, log_tail(log_path, 40))

    def _exit_code(self, name: str, limit: float) -> int | None:
        """The container's exit code once it exits (the engine tells: no polling), or None after
        ``limit`` seconds, when it is killed."""
        with ThreadPoolExecutor(1, thread_name_prefix=f"wait-{name}") as pool:
            waiting = pool.submit(self.docker.container.wait, name)
            try:
                return int(waiting.result(timeout=limit))
            except FutureTimeout:
                with contextlib.suppress(DockerException):  # it may have exited just now
                    self.docker.container.kill(name)  # which ends the wait above
                return None

    def wipe_data(self) -> None:
        """The project's containers and data volumes (a volume in use by a container cannot go)."""
        if self.compose_file.is_file():
            self.docker.compose.down(volumes=True, timeout=int(timeout("stop")), remove_orphans=True, quiet=True)

    def wipe_node(self, node: Node) -> None:
        """The node's stopped container, then its data volume (a volume in use cannot go)."""
        if self._container(node.name) is not None:
            self.docker.compose.rm([node.name], stop=True, volumes=False)
        volumes = self.docker.volume.list(filters=[*self._ours(), ("label", f"com.docker.compose.volume=data-{node.name}")])
        for v in volumes:
            self.docker.volume.remove(v)

    def teardown(self, keep_data: bool) -> None:
        """Every container of the project (nodes are stopped by now); volumes stay when kept."""
        if self.compose_file.is_file():
            self.docker.compose.down(volumes=not keep_data, timeout=int(timeout("stop")), remove_orphans=True,
                                     quiet=True)

    # ----- what the project holds (tests and status use it) -------------------------------------
    def project_containers(self) -> list[str]:
        return [c.name for c in self.docker.container.list(all=True, filters=self._ours())]

    def project_volumes(self) -> list[str]:
        return [v.name for v in self.docker.volume.list(filters=self._ours())]

    def _ours(self) -> list[tuple[Literal["label"], str]]:
        return [("label", f"com.docker.compose.project={self.project}")]


def _last(exc: DockerException) -> str:
    text = (exc.stderr or exc.stdout or str(exc)).strip().splitlines()
    return text[-1] if text else str(exc)
