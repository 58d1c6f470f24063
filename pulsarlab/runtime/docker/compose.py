"""One compose project per deployment, rendered from ``templates/compose.yaml.j2``.

Each node is a service named as the topology names it (``zk``, ``bk1-eu``, ``pulsar1-eu``...) on
the host network, binding its own 127.0.R.N address like on the local runtime. Its rendered
configuration (written with the container's paths) is bind-mounted read-only, its log folder
bind-mounted so the host reads ``node.log`` where the local runtime keeps it, and its data lives in
a named volume of the project.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment

from pulsarlab.classdata import map_options, record_options
from pulsarlab.identity import state_digest
from pulsarlab.render import NodeDirs, node_dirs, render_node, template_env, write_topology
from pulsarlab.runtime.jvm import hosts_text, log_conf_off_the_classpath, memory_limit_mb, pulsar_env
from pulsarlab.security.files import files_of
from pulsarlab.topology import Node, Role, Topology

COMPOSE_FILE = "compose.yaml"
INIT_SERVICE = "metadata-init"
STOP_GRACE_S = 30
# how long a health check may fail while the JVM starts before the container counts as unhealthy
START_PERIOD_S = {Role.ZOOKEEPER: 60, Role.BOOKIE: 120, Role.BROKER: 180}
# room besides heap and direct memory in a container: metaspace, code cache, threads, the init process
MEMORY_OVERHEAD_MB = 256


@dataclass(frozen=True)
class ContainerDirs(NodeDirs):
    """Where a node's files are inside its container: conf and logs mounted from the host beside the
    image's own ``/pulsar/conf`` (whose scripts ``bin/pulsar`` still reads), data in the image's
    group-writable ``/pulsar/data`` (a fresh named volume takes that folder's owner and mode)."""

    root: Path = Path("/pulsarlab")

    @property
    def data(self) -> Path:
        return Path("/pulsar/data")


CONTAINER = ContainerDirs()
# a secure deployment's keys, tokens and certificates, bind-mounted read-only into every broker
CONTAINER_SECURITY = Path("/pulsarlab-security")
# the class archives of the node's image (pulsarlab.runtime.cds), bind-mounted from the host's cache
CONTAINER_CDS = Path("/pulsarlab-cds")


@dataclass(frozen=True)
class ClassSharing:
    """Class-data sharing in the containers of a deployment (the docker runtime's, not the compose
    files written for users). ``folders``: each image's archive folder on the host (mounted at
    CONTAINER_CDS, its ``classpath`` subfolder empty); ``recordings``: the file each recording
    service (the first node of each role, and the metadata init) records to while its kind has
    no archive. The container decides at its start, so a node started after an archive was made
    maps it."""

    folders: Mapping[str, Path]
    recordings: Mapping[str, str]

    def choice(self, service: str, kind: str) -> str:
        """Shell that adds the archive's options to the JVM's (bin/pulsar reads both variables)."""
        archive = CONTAINER_CDS / f"{kind}.jsa"
        record = record_options(CONTAINER_CDS / self.recordings[service]) if service in self.recordings else ""
        return (f'if [ -s {archive} ]; then o="{map_options(archive)}"; else o="{record}"; fi; '
                'export PULSAR_EXTRA_OPTS="$PULSAR_EXTRA_OPTS $o" BOOKIE_EXTRA_OPTS="$BOOKIE_EXTRA_OPTS $o"; ')

    def env(self, env: dict[str, str]) -> dict[str, str]:
        env = dict(env)
        log_conf_off_the_classpath(env, CONTAINER_CDS / "classpath")  # one classpath for every node
        return env


def project_name(topo: Topology, state_dir: Path) -> str:
    """``pulsarlab-<topology>-<state digest>``: two deployments never share a project."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", topo.name.lower()).strip("-") or "cluster"
    return f"pulsarlab-{slug}-{state_digest(state_dir)}"


def health_script(topo: Topology, node: Node) -> str:
    """A bash health check with nothing but bash's ``/dev/tcp`` (the official image has no nc)."""
    addr = topo.address_of(node)
    if node.role == Role.ZOOKEEPER:
        return (f"exec 3<>/dev/tcp/{addr}/{node.port('client')} && printf ruok >&3 && "
                'read -r -t 3 answer <&3; [ "$answer" = imok ]')
    if node.role == Role.BROKER and topo.security is not None:
        # TLS and a token: bash alone cannot ask; pulsarlab's own readiness probe asks with both
        return f"exec 3<>/dev/tcp/{addr}/{node.port('web')}"
    port, path = (node.port("http"), "/api/v1/bookie/is_ready") if node.role == Role.BOOKIE else (
        node.port("web"), "/admin/v2/brokers/ready")
    return (f"exec 3<>/dev/tcp/{addr}/{port} && printf 'GET {path} HTTP/1.0\\r\\nHost: {addr}\\r\\n\\r\\n' >&3 && "
            'read -r -t 3 status <&3; [[ "$status" == HTTP/1.?" 200 "* ]]')


def log_command(args: list[str], log: str, before: str = "") -> list[str]:
    """``bin/pulsar <args>`` with its output appended to ``log`` inside the container (``exec``: the
    JVM replaces bash, so the container's init hands SIGTERM straight to it); ``before``: shell
    run first (the class archive's choice)."""
    quoted = " ".join(_sh_quote(a) for a in args)
    return ["bash", "-c", f"{before}exec bin/pulsar {quoted} >>{log} 2>&1"]


def _sh_quote(s: str) -> str:
    return s if re.fullmatch(r"[\w@%+=:,./-]+", s) else "'" + s.replace("'", "'\\''") + "'"


@dataclass
class Service:
    name: str
    role: str
    container: str
    image: str
    command: list[str]
    env: dict[str, str]
    conf: str
    logs: str
    volume: str = ""
    health: str = ""
    security: str = ""  # the host's security folder, mounted at CONTAINER_SECURITY (secure brokers only)
    cds: str = ""  # the host's archive folder of the service's image, mounted at CONTAINER_CDS
    mem_limit_mb: int = 0
    start_period: int = 0


def services(topo: Topology, state_dir: Path, project: str, image: str,
             node_images: Mapping[str, str] | None = None, cds: ClassSharing | None = None) -> list[Service]:
    """One service per node, each on ``image`` unless ``node_images`` names its own (a node an
    upgrade moved to another release)."""
    out = []
    for node in topo.nodes:
        host = node_dirs(state_dir, node)
        node_image = (node_images or {}).get(node.name, image)
        env = pulsar_env(topo, node, CONTAINER)
        shared = cds if cds is not None and node_image in cds.folders else None
        out.append(Service(
            name=node.name, role=node.role.value, container=f"{project}-{node.name}", image=node_image,
            command=log_command([node.role.start_command], str(CONTAINER.log_file),
                                shared.choice(node.name, node.role.value) if shared else ""),
            env=shared.env(env) if shared else env, conf=str(host.conf), logs=str(host.logs),
            volume=f"data-{node.name}", health=health_script(topo, node),
            security=str(files_of(state_dir).root) if topo.security is not None and node.role == Role.BROKER else "",
            cds=str(shared.folders[node_image]) if shared else "",
            mem_limit_mb=memory_limit_mb(topo, node, MEMORY_OVERHEAD_MB), start_period=START_PERIOD_S[node.role],
        ))
    return out


def init_service(topo: Topology, state_dir: Path, project: str, image: str, cds: ClassSharing | None = None) -> Service:
    """The one-off service that runs ``initialize-cluster-metadata`` (ZooKeeper's JVM settings and log
    configuration; its output goes to ``<state>/logs/init-<cluster>.log``)."""
    zk = topo.nodes_of(Role.ZOOKEEPER)[0]
    env = pulsar_env(topo, zk, CONTAINER)
    shared = cds if cds is not None and image in cds.folders else None
    return Service(
        name=INIT_SERVICE, role="metadata-init", container=f"{project}-{INIT_SERVICE}", image=image, command=[],
        env=shared.env(env) if shared else env, conf=str(node_dirs(state_dir, zk).conf),
        logs=str(state_dir.resolve() / "logs"), mem_limit_mb=memory_limit_mb(topo, zk, MEMORY_OVERHEAD_MB),
        cds=str(shared.folders[image]) if shared else "",
    )


def compose_env() -> Environment:
    """The template environment with the two filters compose files need."""
    env = template_env()
    env.filters["dollars"] = lambda s: s.replace("$", "$$")  # compose interpolates $NAME
    env.filters["q"] = lambda v: json.dumps(str(v) if isinstance(v, Path) else v)  # JSON scalars are YAML
    return env


def compose_text(topo: Topology, state_dir: Path, image: str, project: str, user: str | None = None,
                 node_images: Mapping[str, str] | None = None, cds: ClassSharing | None = None) -> str:
    return compose_env().get_template("compose.yaml.j2").render(
        project=project, topo=topo, user=user or f"{os.getuid()}:0", container=CONTAINER,
        services=services(topo, state_dir, project, image, node_images, cds),
        init=init_service(topo, state_dir, project, image, cds),
        stop_grace=STOP_GRACE_S, security_target=CONTAINER_SECURITY, cds_target=CONTAINER_CDS,
    )


def write_node_files(topo: Topology, out: Path, node: Node, base_conf: Path | None = None) -> list[Path]:
    """The node's configuration (its container paths, over ``base_conf``: a distribution's own
    ``conf/``) under ``out/nodes/<node>/conf``, a broker's hosts file, and its empty log folder."""
    host = node_dirs(out, node)
    rendered = render_node(topo, node, CONTAINER, base_conf, CONTAINER_SECURITY)
    files = {host.conf / p.name: text for p, text in rendered.items()}
    if node.role == Role.BROKER:
        files[host.conf / "hosts"] = hosts_text(topo, node)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    host.logs.mkdir(parents=True, exist_ok=True)
    return list(files)


def write_compose_file(topo: Topology, out: Path, image: str, project: str | None = None,
                       node_images: Mapping[str, str] | None = None, cds: ClassSharing | None = None) -> Path:
    path = out / COMPOSE_FILE
    path.write_text(compose_text(topo, out, image, project or project_name(topo, out), node_images=node_images, cds=cds))
    return path


def render_compose(topo: Topology, out: Path, image: str, base_conf: Path | None = None,
                   project: str | None = None, node_images: Mapping[str, str] | None = None,
                   cds: ClassSharing | None = None) -> list[Path]:
    """Write every node's configuration (with its container paths) under ``out/nodes/<node>/conf``,
    the brokers' hosts files, empty log folders and ``out/compose.yaml``; return the files written."""
    out = out.resolve()
    written: list[Path] = []
    for node in topo.nodes:
        written += write_node_files(topo, out, node, base_conf)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    written += [write_compose_file(topo, out, image, project, node_images, cds), write_topology(topo, out)]
    return written
