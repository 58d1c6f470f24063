"""Render every configuration artifact of a topology from the Jinja templates in ``templates/``.

The templates hold only what the topology decides. When the distribution's own ``conf/`` is given,
each rendered file is the shipped file with those keys replaced in place (and the missing ones
appended), so every other shipped default stays as the Pulsar release intends.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from pulsarlab import settings
from pulsarlab.security.files import SECURITY_DIR, SecurityFiles
from pulsarlab.topology import Node, Role, Topology
from pulsarlab.topology.settings import Setting, effective_config, effective_jvm_options


def _templates_dir() -> Path:
    """``PULSARLAB_TEMPLATES`` if set; else the templates an installed wheel carries (as
    ``pulsarlab/templates/``), else the checkout's top-level ``templates/`` (an editable install)."""
    here = Path(__file__).resolve().parent
    return settings.current().templates_dir or next(
        (d for d in (here / "templates", here.parent / "templates") if (d / "broker.conf.j2").is_file()), here / "templates")


TEMPLATES_DIR = _templates_dir()

CONF_FILE = {Role.ZOOKEEPER: "zookeeper.conf", Role.BOOKIE: "bookkeeper.conf", Role.BROKER: "broker.conf"}


@dataclass(frozen=True)
class NodeDirs:
    """Where one node keeps its files."""

    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def conf_file(self, role: Role) -> Path:
        return self.conf / CONF_FILE[role]

    @property
    def log_file(self) -> Path:
        return self.logs / "node.log"

    @property
    def pid_file(self) -> Path:
        return self.root / "node.pid"


def node_dirs(base: Path, node: Node) -> NodeDirs:
    return NodeDirs(base.resolve() / "nodes" / node.name)


def template_env() -> Environment:
    """The Jinja environment of ``templates/`` (strict: an undefined name is an error)."""
    return Environment(
        loader=FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def bookkeeper_metadata_uri(topo: Topology, cluster: str) -> str:
    """BookKeeper metadata through Pulsar's metadata-store driver (it appends ``/ledgers``)."""
    return f"metadata-store:{topo.metadata_store_url(cluster)}"


def parse_properties(text: str) -> dict[str, str]:
    """``key=value`` lines of a Java properties file (comments and blanks skipped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or "=" not in s:
            continue
        k, v = s.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def merge_properties(base: str, overrides: dict[str, str], header: str) -> str:
    """Replace the active ``key=`` lines of ``base`` with ``overrides``; append the keys it lacks."""
    done: set[str] = set()
    lines = []
    for line in base.splitlines():
        s = line.strip()
        if s and not s.startswith("#") and "=" in s:
            key = s.split("=", 1)[0].strip()
            if key in overrides:
                lines.append(f"{key}={overrides[key]}")
                done.add(key)
                continue
        lines.append(line)
    rest = [f"{k}={v}" for k, v in overrides.items() if k not in done]
    if rest:
        lines += ["", f"# {header}", *rest]
    return "\n".join(lines) + "\n"


def last_wins(text: str) -> str:
    """``text`` without the active ``key=`` lines a later line of the same key overrides (a
    topology's setting of a key pulsarlab's template sets too: one line, the topology's)."""
    lines = text.splitlines(keepends=True)
    last = {k: i for i, line in enumerate(lines) if (k := _active_key(line))}
    return "".join(line for i, line in enumerate(lines) if (k := _active_key(line)) is None or last[k] == i)


def _active_key(line: str) -> str | None:
    s = line.strip()
    return s.split("=", 1)[0].strip() if s and not s.startswith("#") and "=" in s else None


# a bookie's metadata-store session (zkTimeout): templates/bookkeeper.conf.j2 says why this long
BOOKIE_SESSION_MS = 30_000


def bookie_session_s(topo: Topology, node: Node) -> float:
    """How long ``node`` (a bookie) may lose ZooKeeper before its session is declared lost: the
    topology's ``zkTimeout`` for it if set, else pulsarlab's."""
    set_ = node_settings(topo, node).get("zkTimeout")
    return int(set_.text if set_ else BOOKIE_SESSION_MS) / 1000


def node_settings(topo: Topology, node: Node) -> dict[str, Setting]:
    """The ``config`` keys ``node`` gets from the topology (top level < cluster < node)."""
    return effective_config(topo.settings_levels(node), node.role.value)


def _context(topo: Topology, node: Node, dirs: NodeDirs, security_root: Path | None, with_settings: bool) -> dict:
    cluster = topo.cluster(node.cluster) if node.cluster else None
    return {
        "node": node,
        "cluster": cluster,
        "address": topo.address_of(node),
        "rack": topo.rack_of(node),
        "dirs": dirs,
        "journal_sync": topo.fsync,
        "configuration_store_url": topo.configuration_store_url(),
        "metadata_store_url": topo.metadata_store_url(node.cluster) if node.cluster else "",
        "bookkeeper_metadata_uri": bookkeeper_metadata_uri(topo, node.cluster) if node.cluster else "",
        "bookie_session_ms": BOOKIE_SESSION_MS,
        "auto_recovery": node.role == Role.BOOKIE and topo.runs_auto_recovery(node),
        "log_file": dirs.log_file,
        "log_level": "info",
        "security": topo.security,
        "sec": SecurityFiles(security_root or dirs.root.parent.parent / SECURITY_DIR),
        "topology_settings": {k: s.text for k, s in node_settings(topo, node).items()} if with_settings else {},
    }


def render_node(
    topo: Topology, node: Node, dirs: NodeDirs, base_conf: Path | None = None, security_root: Path | None = None
) -> dict[Path, str]:
    """The files of one node: its server configuration and its log configuration. ``security_root``:
    where the node finds the secure profile's material (default: ``security/`` beside ``nodes/``)."""
    env = template_env()
    ctx = _context(topo, node, dirs, security_root, with_settings=True)
    name = CONF_FILE[node.role]
    text = last_wins(env.get_template(f"{name}.j2").render(**ctx))
    if base_conf is not None and (base_conf / name).is_file():
        header = text.splitlines()[0].lstrip("# ")
        text = merge_properties((base_conf / name).read_text(), parse_properties(text), header)
    return {
        dirs.conf_file(node.role): text,
        dirs.conf / "log4j2.yaml": env.get_template("log4j2.yaml.j2").render(**ctx),
    }


@dataclass(frozen=True)
class Explained:
    """One effective value of a node and where it came from: ``distribution`` (the release's
    shipped file), ``pulsarlab`` (the templates), ``topology``, ``cluster NAME`` or ``node NAME``
    (its ``config`` sections); ``file`` is the configuration file, or ``jvm`` for a JVM option."""

    file: str
    key: str
    value: str
    origin: str


def explain_node(topo: Topology, node: Node, base_conf: Path | None = None) -> list[Explained]:
    """Every key of the node's configuration file as rendered (the distribution's shipped keys
    too when ``base_conf`` is given), then the JVM options its topology gives, each with its origin."""
    name = CONF_FILE[node.role]
    dirs = node_dirs(Path("."), node)
    own = parse_properties(template_env().get_template(f"{name}.j2").render(
        **_context(topo, node, dirs, None, with_settings=False)))
    shipped = parse_properties((base_conf / name).read_text()) if base_conf and (base_conf / name).is_file() else {}
    levels = node_settings(topo, node)
    rows = []
    for key in {**shipped, **own, **levels}:
        if key in levels:
            rows.append(Explained(name, key, levels[key].text, levels[key].origin))
        elif key in own:
            rows.append(Explained(name, key, own[key], "pulsarlab"))
        else:
            rows.append(Explained(name, key, shipped[key], "distribution"))
    jvm = effective_jvm_options(topo.settings_levels(node), node.role.value)
    return rows + [Explained("jvm", key, s.text, s.origin) for key, s in jvm.items()]


def render(topo: Topology, out: Path, base_conf: Path | None = None) -> list[Path]:
    """Write every node's configuration under ``out/nodes/<node>/conf`` plus the resolved topology."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for node in topo.nodes:
        dirs = node_dirs(out, node)
        for path, text in render_node(topo, node, dirs, base_conf).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    written.append(write_topology(topo, out))
    return written


def write_topology(topo: Topology, out: Path) -> Path:
    """The resolved topology beside the rendered files (what later commands open)."""
    resolved = out / "topology.yaml"
    resolved.write_text(yaml.safe_dump(topo.model_dump(mode="json"), sort_keys=False))
    return resolved
