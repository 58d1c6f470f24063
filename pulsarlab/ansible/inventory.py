"""A topology as an Ansible inventory: hosts in groups ``zookeeper``, ``bookies`` and ``brokers``
(plus ``cluster_<name>`` and ``region_<name>``), each with its cluster, region, rack and address,
and every node's configuration rendered from the same templates as every other runtime."""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import ip_address
from pathlib import Path, PurePosixPath

import yaml

from pulsarlab import distribution, timeouts
from pulsarlab.admin.commands import metadata_init_script, rack_document
from pulsarlab.errors import TopologyError
from pulsarlab.render import node_dirs, render_node
from pulsarlab.runtime.jvm import pulsar_env
from pulsarlab.topology import Role, Topology, load

ROLE_GROUP = {Role.ZOOKEEPER: "zookeeper", Role.BOOKIE: "bookies", Role.BROKER: "brokers"}
HOST_BASE = PurePosixPath("/var/lib/pulsarlab")  # nodes/<node>/{conf,data,logs} on each host
INSTALL_DIR = PurePosixPath("/opt/pulsar")
GROUP_NAME = re.compile(r"[^A-Za-z0-9_]")


def group_name(prefix: str, name: str) -> str:
    """An Ansible group name (letters, digits, underscores) for a cluster or region."""
    return f"{prefix}_{GROUP_NAME.sub('_', name)}"


def host_vars(topo: Topology, name: str) -> dict[str, object]:
    node = topo.node(name)
    dirs = node_dirs(Path(str(HOST_BASE)), node)
    return {
        "ansible_host": topo.address_of(node),
        "pulsar_role": node.role.value,
        "pulsar_node_command": node.role.start_command,
        "pulsar_cluster": node.cluster,
        "pulsar_region": node.region,
        "pulsar_rack": topo.rack_of(node),
        "pulsar_address": topo.address_of(node),
        "pulsar_ports": {kind: node.port(kind) for kind in sorted(topo.port_kinds(node))},
        "pulsar_node_dir": str(dirs.root),
        "pulsar_env": pulsar_env(topo, node, dirs),
    }


def inventory(topo: Topology) -> dict[str, object]:
    """The YAML inventory: role groups hold the hosts and their variables; cluster and region
    groups list the same hosts by name."""
    children: dict[str, object] = {}
    for role, group in ROLE_GROUP.items():
        nodes = topo.nodes_of(role)
        if nodes:
            children[group] = {"hosts": {n.name: host_vars(topo, n.name) for n in nodes}}
    # the first bookie of each cluster starts alone (Topology.first_bookie says why)
    first = [topo.first_bookie(c.name).name for c in topo.clusters if topo.nodes_of(Role.BOOKIE, c.name)]
    if first:
        children["bookies_first"] = {"hosts": dict.fromkeys(first)}
    # filled while deploy.yml runs (running nodes whose files changed); empty here, so that a run with
    # nothing to restart skips its restart plays without a warning
    for role in ROLE_GROUP:
        children[f"pulsar_restart_{role.value}"] = {"hosts": {}}
    for c in topo.clusters:
        children[group_name("cluster", c.name)] = {"hosts": {n.name: None for n in topo.nodes if n.cluster == c.name}}
    for r in topo.regions:
        children[group_name("region", r)] = {"hosts": {n.name: None for n in topo.nodes if n.region == r}}
    return {"all": {"vars": {"pulsar_topology": topo.name}, "children": children}}


def group_vars(topo: Topology, version: str, artifact: Path | None = None) -> dict[str, object]:
    """What every play shares: the distribution (``pulsar_artifact``: the tarball on the controller,
    from the local Maven repository pulsarlab downloads into, for sites without internet), each
    cluster's metadata initialisation (skipped when done) and rack map (what Pulsar stores), and
    the factor every wait of the playbooks is multiplied by (PULSARLAB_TIMEOUT_SCALE where the
    inventory was rendered, as pulsarlab's own waits are: a slow site sets it once)."""
    return {
        "pulsar_version": version,
        "pulsar_artifact": str(artifact or distribution.maven_tarball(version)),
        "pulsar_install_dir": str(INSTALL_DIR),
        "pulsar_home": str(INSTALL_DIR / f"apache-pulsar-{version}"),
        "pulsar_host_base": str(HOST_BASE),
        "pulsar_clusters": [c.name for c in topo.clusters],
        "pulsar_zookeeper_connect": topo.zookeeper_connect(),
        "pulsar_metadata_init": {c.name: metadata_init_script(topo, c.name) for c in topo.clusters},
        "pulsar_racks": [{"path": f"{c.metadata_root}/bookies", "doc": rack_document(topo, c.name)}
                         for c in topo.clusters if rack_document(topo, c.name)],
        "pulsar_timeout_scale": timeouts.scale(),
    }


def render_ansible(topo: Topology, out: Path, version: str, base_conf: Path | None = None,
                   artifact: Path | None = None) -> list[Path]:
    """Write ``inventory.yml``, ``group_vars/all.yml``, each host's configuration under
    ``host_files/<node>/`` (paths as on the host, below ``pulsar_node_dir``) and the topology;
    ``artifact``: the distribution's tarball the hosts install (default: Maven's copy)."""
    out.mkdir(parents=True, exist_ok=True)
    written = [
        _write(out / "inventory.yml", yaml.safe_dump(inventory(topo), sort_keys=False)),
        _write(out / "group_vars" / "all.yml", yaml.safe_dump(group_vars(topo, version, artifact), sort_keys=False)),
    ]
    for node in topo.nodes:
        dirs = node_dirs(Path(str(HOST_BASE)), node)
        for path, text in render_node(topo, node, dirs, base_conf).items():
            written.append(_write(out / "host_files" / node.name / path.relative_to(dirs.root), text))
    written.append(_write(out / "topology.yaml", yaml.safe_dump(topo.model_dump(mode="json"), sort_keys=False)))
    return written


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@dataclass
class Validation:
    topology: Topology
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        topo = self.topology
        counts = ", ".join(f"{g} {len(topo.nodes_of(r))}" for r, g in ROLE_GROUP.items())
        clusters = ", ".join(c.name for c in topo.clusters)
        return f"{len(topo.nodes)} hosts ({counts}); regions {', '.join(topo.regions)}; clusters {clusters}"


def validate_hosts(path: Path) -> Validation:
    """A user's own hosts, as a topology file whose nodes name their addresses: the topology
    model's checks (roles, regions, racks, quorums, two nodes on one address and port), then what
    real hosts need: every node an explicit, non-loopback address."""
    try:
        topo = load(str(path), loopback=False)
    except TopologyError as exc:
        return Validation(Topology.model_construct(name=str(path), regions=[], nodes=[], clusters=[]), [str(exc)])
    problems = []
    for node in topo.nodes:
        if not node.address:
            problems.append(f"{node.name}: no address (a host needs its own, e.g. address: 10.0.1.5)")
            continue
        try:
            addr = ip_address(node.address)
        except ValueError:
            addr = None
        if addr is not None and addr.is_loopback:
            problems.append(f"{node.name}: {node.address} is a loopback address, not a host's")
    return Validation(topo, problems)
