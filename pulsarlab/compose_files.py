"""Compose files for plain Docker Compose (``compose/<topology>.yml``): the blog's clusters with no
pulsarlab installed, configured as pulsarlab configures them.

The nodes are the services of ``--runtime docker`` (:mod:`pulsarlab.runtime.docker.compose`: same
names, host networking on the same 127.0.R.N addresses, same JVM settings and health checks), with
what pulsarlab otherwise does from outside carried inside the file:

* each node's configuration travels in the file as the keys the topology decides (compose
  ``configs`` with inline content); at start the container merges them into the image's shipped
  file with :data:`MERGE_SCRIPT`, the same rule as :func:`pulsarlab.render.merge_properties`
  (a key replaced where it stands, a missing one appended);
* start order is ``depends_on`` on health checks: ZooKeeper, each cluster's metadata
  initialisation (one after another; skipped when already done), the racks (written into the
  metadata store before any broker starts, so each broker's BookKeeper client knows its region
  from the start), one bookie, the other bookies, the brokers, then ``configure``;
* ``configure`` runs the distribution's ``pulsar-admin`` commands rendered from the topology
  (:mod:`pulsarlab.admin.commands`), writes only what differs, reads everything back and exits
  non-zero on a difference;
* the ``monitoring`` profile adds Prometheus (and Grafana with pulsarlab's dashboards).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pulsarlab.admin import commands
from pulsarlab.distribution import DEFAULT_VERSION
from pulsarlab.monitoring import grafana
from pulsarlab.monitoring.prometheus import default_address, render_config
from pulsarlab.render import CONF_FILE, render_node
from pulsarlab.runtime.docker.compose import (
    CONTAINER,
    MEMORY_OVERHEAD_MB,
    START_PERIOD_S,
    STOP_GRACE_S,
    compose_env,
    health_script,
)
from pulsarlab.runtime.docker.image import default_tag
from pulsarlab.runtime.jvm import log_conf_off_the_classpath, memory_limit_mb, pulsar_env
from pulsarlab.topology import Node, Role, Topology

OVERLAY_DIR = PurePosixPath("/pulsarlab/overlay")
# The configure script's pulsar-admin calls share one class archive in the container (measured in a
# sync project: 2.5-3.2 s and 2.6 CPU s a call against 4.6-5.0 s and 4.1 CPU s), with this empty
# folder first on their classpath (runtime.jvm.log_conf_off_the_classpath).
ADMIN_CLASSPATH_DIR = PurePosixPath("/tmp/pulsarlab-classes/classpath")
HOSTS_FILE = PurePosixPath("/pulsar/conf/pulsarlab-hosts")
SHIPPED_CONF = PurePosixPath("/pulsar/conf")
GRAFANA_IMAGE = "grafana/grafana:11.3.0"
OFFICIAL_IMAGE = "apachepulsar/pulsar"
PROMETHEUS_PORT = 9090
GRAFANA_PORT = 3000

# conf-merge OVERLAY FILE: FILE's active "key=" lines whose key OVERLAY sets take OVERLAY's value in
# place; OVERLAY's other keys are appended. Comments and blank lines of OVERLAY are ignored.
MERGE_SCRIPT = r"""#!/bin/bash
# conf-merge OVERLAY FILE (rendered by pulsarlab): the keys OVERLAY sets replace FILE's, in place;
# keys FILE lacks are appended. Re-running it changes nothing.
set -euo pipefail
overlay=$1 file=$2
awk '
  function key(line,   k) { k = line; sub(/=.*/, "", k); gsub(/^[ \t]+|[ \t]+$/, "", k); return k }
  function active(line) { return line !~ /^[ \t]*(#|$)/ && index(line, "=") > 0 }
  FNR == NR { if (active($0)) { k = key($0); v = $0; sub(/^[^=]*=/, "", v); gsub(/^[ \t]+|[ \t]+$/, "", v)
                                if (!(k in want)) order[++n] = k; want[k] = v }
              next }
  active($0) && (key($0) in want) { k = key($0); print k "=" want[k]; done[k] = 1; next }
  { print }
  END { for (i = 1; i <= n; i++) if (!(order[i] in done)) print order[i] "=" want[order[i]] }
' "$overlay" "$file" > "$file.merged"
mv "$file.merged" "$file"
"""


@dataclass
class Config:
    """One compose ``configs`` entry: a file's content, mounted read-only where a service wants it."""

    name: str
    content: str


@dataclass
class StandaloneService:
    name: str
    role: str
    command: list[str]
    env: dict[str, str]
    configs: list[tuple[str, str]]  # (config name, target path)
    depends: dict[str, str] = field(default_factory=dict)  # service -> condition
    health: list[str] = field(default_factory=list)
    start_period: int = 0
    mem_limit_mb: int = 0
    volume: tuple[str, str] | None = None  # (volume name, mount point)
    profiles: list[str] = field(default_factory=list)
    image: str = ""  # default: the Pulsar image
    entrypoint: list[str] | None = None


def _overlay(topo: Topology, node: Node) -> dict[str, str]:
    """The node's configuration files as pulsarlab renders them (without the shipped defaults),
    with container paths: ``{file name: text}``."""
    return {p.name: text for p, text in render_node(topo, node, CONTAINER).items()}


def node_service(topo: Topology, node: Node, configs: dict[str, Config]) -> StandaloneService:
    files = _overlay(topo, node)
    conf_name = CONF_FILE[node.role]
    mounts = []
    for fname, text in files.items():
        cname = f"{node.name}-{fname}"
        configs[cname] = Config(cname, text)
        mounts.append((cname, str(OVERLAY_DIR / fname)))
    env = pulsar_env(topo, node, CONTAINER)
    env["PULSAR_LOG_CONF"] = str(OVERLAY_DIR / "log4j2.yaml")
    for key in ("PULSAR_ZK_CONF", "PULSAR_BOOKKEEPER_CONF", "PULSAR_BROKER_CONF"):
        env.pop(key)
    hosts = ""
    if node.role == Role.BROKER:
        # the machine's name resolves to the broker's own address (see runtime.jvm.hosts_text); the
        # name is the host's, known only where the file runs, so the file is written at start
        env["PULSAR_EXTRA_OPTS"] = env["PULSAR_EXTRA_OPTS"].replace(
            f"-Djdk.net.hosts.file={CONTAINER.conf / 'hosts'}", f"-Djdk.net.hosts.file={HOSTS_FILE}")
        hosts = f"printf '%s %s\\n127.0.0.1 localhost\\n' {topo.address_of(node)} \"$HOSTNAME\" > {HOSTS_FILE} && "
    mounts.append(("conf-merge", "/pulsarlab/conf-merge"))
    env["PULSAR_LOG_DIR"] = "/pulsar/logs"
    script = (f"{hosts}bash /pulsarlab/conf-merge {OVERLAY_DIR / conf_name} {SHIPPED_CONF / conf_name} && "
              f"exec bin/pulsar {node.role.start_command}")
    return StandaloneService(
        name=node.name, role=node.role.value, command=["bash", "-c", script], env=env, configs=mounts,
        health=["CMD", "bash", "-c", health_script(topo, node)], start_period=START_PERIOD_S[node.role],
        mem_limit_mb=memory_limit_mb(topo, node, MEMORY_OVERHEAD_MB), volume=(f"data-{node.name}", str(CONTAINER.data)),
    )


def _tool_service(topo: Topology, name: str, command: str, depends: dict[str, str],
                  configs: list[tuple[str, str]] | None = None) -> StandaloneService:
    zk = topo.nodes_of(Role.ZOOKEEPER)[0]
    env = {k: v for k, v in pulsar_env(topo, zk, CONTAINER).items() if k.endswith(("_MEM", "_GC", "_GC_LOG"))}
    env["PULSAR_LOG_CONF"] = str(OVERLAY_DIR / "log4j2.yaml")
    env["PULSAR_LOG_DIR"] = "/pulsar/logs"
    # bin/pulsar-admin reads neither PULSAR_MEM nor PULSAR_GC, only PULSAR_EXTRA_OPTS: without them
    # each call of the configure script starts a JVM with G1, the optimising compiler and a quarter
    # of the machine's memory as heap, about three times the CPU (measured: 6.0 against 1.9 s a call)
    env["PULSAR_EXTRA_OPTS"] = f"{env['PULSAR_MEM']} {env['PULSAR_GC']}"
    return StandaloneService(name=name, role="tool", command=["bash", "-c", command], env=env,
                             configs=[(f"{zk.name}-log4j2.yaml", str(OVERLAY_DIR / "log4j2.yaml")), *(configs or [])],
                             depends=depends, mem_limit_mb=memory_limit_mb(topo, zk, MEMORY_OVERHEAD_MB))


def services(topo: Topology, configs: dict[str, Config]) -> list[StandaloneService]:
    """Every service in start order: nodes, one-shot tools, and the monitoring profile."""
    nodes = {n.name: node_service(topo, n, configs) for n in topo.nodes}
    healthy, done = "service_healthy", "service_completed_successfully"
    zk = topo.nodes_of(Role.ZOOKEEPER)
    out: list[StandaloneService] = [nodes[n.name] for n in zk]
    previous: dict[str, str] = {z.name: healthy for z in zk}
    for c in topo.clusters:  # one after another: the inits share the configuration store
        init = _tool_service(topo, f"init-{c.name}", commands.metadata_init_script(topo, c.name), dict(previous))
        out.append(init)
        previous = {init.name: done}
    racks = _tool_service(topo, "racks", commands.racks_seed_script(topo), dict(previous))
    out.append(racks)
    for c in topo.clusters:
        bookies = topo.nodes_of(Role.BOOKIE, c.name)
        lead = topo.first_bookie(c.name)
        first, rest = nodes[lead.name], [nodes[b.name] for b in bookies if b != lead]
        first.depends = {racks.name: done}
        for s in rest:  # one bookie first on a fresh cluster (Topology.first_bookie says why)
            s.depends = {first.name: healthy}
        out += [first, *rest]
    brokers = [nodes[b.name] for b in topo.nodes_of(Role.BROKER)]
    for s in brokers:
        s.depends = {nodes[b.name].name: healthy for b in topo.nodes_of(Role.BOOKIE)}
    out += brokers
    configs["configure.sh"] = Config("configure.sh", commands.configure_script(topo))
    configure = _tool_service(topo, "configure", f"mkdir -p {ADMIN_CLASSPATH_DIR} && exec bash /pulsarlab/configure.sh",
                              {b.name: healthy for b in brokers}, [("configure.sh", "/pulsarlab/configure.sh")])
    out.append(_sharing_classes(configure))
    out += monitoring_services(topo, configs)
    return out


def _sharing_classes(service: StandaloneService) -> StandaloneService:
    log_conf_off_the_classpath(service.env, ADMIN_CLASSPATH_DIR)
    service.env[commands.CLASS_ARCHIVE_VAR] = str(ADMIN_CLASSPATH_DIR.parent / "pulsar-admin.jsa")
    return service


def monitoring_services(topo: Topology, configs: dict[str, Config]) -> list[StandaloneService]:
    """Prometheus (the image ``pulsarlab image build --prometheus`` makes from Debian's package, or an
    official one) and Grafana, provisioned with pulsarlab's datasource and dashboards."""
    address = default_address(topo)
    configs["prometheus.yml"] = Config("prometheus.yml", render_config(topo))
    prom = StandaloneService(
        name="prometheus", role="monitoring", env={}, image="${PULSARLAB_PROMETHEUS_IMAGE:-prom/prometheus:v2.53.3}",
        entrypoint=["prometheus"],
        command=["--config.file=/etc/pulsarlab/prometheus.yml", "--storage.tsdb.path=/prometheus",
                 f"--web.listen-address={address}:{PROMETHEUS_PORT}"],
        configs=[("prometheus.yml", "/etc/pulsarlab/prometheus.yml")], volume=("data-prometheus", "/prometheus"),
        health=["CMD-SHELL", f"wget -q -O /dev/null http://{address}:{PROMETHEUS_PORT}/-/ready"], start_period=30,
        mem_limit_mb=512,
    )
    prom_url = f"http://{address}:{PROMETHEUS_PORT}"
    gconfigs = []
    for name, text in grafana.provisioning_files(prom_url, "/etc/pulsarlab/dashboards").items():
        cname = "grafana-" + Path(name).name
        configs[cname] = Config(cname, text)
        target = (f"/etc/pulsarlab/dashboards/{Path(name).name}" if name.startswith("dashboards/json/")
                  else f"/etc/grafana/provisioning/{name}")
        gconfigs.append((cname, target))
    graf = StandaloneService(
        name="grafana", role="monitoring", profiles=["monitoring"], image=f"${{PULSARLAB_GRAFANA_IMAGE:-{GRAFANA_IMAGE}}}",
        env={"GF_SERVER_HTTP_ADDR": address, "GF_SERVER_HTTP_PORT": str(GRAFANA_PORT),
             "GF_AUTH_ANONYMOUS_ENABLED": "true", "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer"},
        command=[], configs=gconfigs, depends={"prometheus": "service_healthy"}, mem_limit_mb=512,
    )
    return [prom, graf]


def compose_file_text(topo: Topology, builtin_name: str | None = None) -> str:
    """The whole compose file for ``topo``."""
    configs: dict[str, Config] = {"conf-merge": Config("conf-merge", MERGE_SCRIPT)}
    svcs = services(topo, configs)
    return compose_env().get_template("compose-standalone.yaml.j2").render(
        topo=topo, ref=builtin_name or topo.name, services=svcs, configs=list(configs.values()),
        image=f"${{PULSARLAB_IMAGE:-{OFFICIAL_IMAGE}:{DEFAULT_VERSION}}}", local_image=default_tag(DEFAULT_VERSION),
        stop_grace=STOP_GRACE_S, address=default_address(topo), prometheus_port=PROMETHEUS_PORT,
        grafana_port=GRAFANA_PORT,
    )


def write_compose_files(topos: dict[str, Topology], out: Path) -> list[Path]:
    """``out/<name>.yml`` for each topology."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, topo in topos.items():
        path = out / f"{name}.yml"
        path.write_text(compose_file_text(topo, name))
        written.append(path)
    return written
