"""``pulsarlab doctor``: is this machine ready to run a topology, and what to do about each missing piece."""

from __future__ import annotations

import shutil
import socket
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from pulsarlab import distribution, settings
from pulsarlab.errors import PulsarlabError
from pulsarlab.topology import Topology, load

JDK_FIX = "install a JDK 17 (e.g. apt-get install openjdk-17-jdk-headless) or set JAVA_HOME to one"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    found: str
    fix: str = ""
    required: bool = True  # False: only some commands need it (the docker runtime)

    def to_dict(self) -> dict:
        return asdict(self)


def check_java() -> Check:
    try:
        java = distribution.find_java()
    except PulsarlabError as exc:
        return Check("java", False, str(exc).split(":")[0], JDK_FIX)
    return Check("java", True, f"Java {java.major} at {java.executable}")


def check_javac() -> Check:
    home = settings.current().java_home
    javac = str(home / "bin" / "javac") if home else shutil.which("javac")
    if javac and Path(javac).exists():
        return Check("javac", True, javac)
    return Check("javac", False, "no javac (a JRE only?): the workload driver is compiled on first use", JDK_FIX)


def cached(version: str = distribution.DEFAULT_VERSION) -> Path | None:
    home = distribution.cache_root() / "pulsar" / f"apache-pulsar-{version}"
    return home if (home / distribution.VERIFIED_MARK).is_file() else None


def check_distribution() -> Check:
    home = cached()
    if home:
        return Check("distribution", True, f"Pulsar {distribution.DEFAULT_VERSION} cached at {home}")
    return Check("distribution", False, f"Pulsar {distribution.DEFAULT_VERSION} is not cached under {distribution.cache_root()}",
                 "the first 'pulsarlab up' fetches it with Maven (about 250 MB), or pass --distribution TARBALL")


def check_maven() -> Check:
    mvn = shutil.which("mvn")
    if mvn:
        return Check("maven", True, mvn)
    if cached():
        return Check("maven", True, "no mvn, not needed: the distribution is cached")
    return Check("maven", False, "no mvn on PATH and the distribution is not cached",
                 "install Maven (e.g. apt-get install maven) or pass --distribution TARBALL to 'pulsarlab up'")


def jvm_budget_mb(topo: Topology) -> int:
    from pulsarlab.runtime.jvm import heap_and_direct_mb

    return sum(sum(heap_and_direct_mb(topo, n)) for n in topo.nodes)


def check_memory(topo: Topology) -> Check:
    need = jvm_budget_mb(topo)
    free = psutil.virtual_memory().available // 2**20
    found = f"{free} MB available; the {topo.name} topology's JVMs may use {need} MB (heap and direct memory)"
    if free >= need:
        return Check("memory", True, found)
    return Check("memory", False, found, "stop other programs or clusters, or choose a smaller topology (smoke)")


def check_ports(topo: Topology) -> Check:
    taken = []
    for node, address, port in topo.endpoints():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((address, port))
            except OSError:
                taken.append(f"{address}:{port} ({node.name})")
    if not taken:
        return Check("ports", True, f"all {len(topo.endpoints())} addresses and ports of {topo.name} are free")
    return Check("ports", False, f"in use: {', '.join(taken[:5])}" + (f" and {len(taken) - 5} more" if len(taken) > 5 else ""),
                 "a cluster of this topology may be running ('pulsarlab status'; 'pulsarlab down' stops it), "
                 "or set another address_prefix (127.<n>) in the topology file")


def check_docker() -> Check:
    from pulsarlab.runtime.docker import engine

    try:
        e = engine.check()
    except PulsarlabError as exc:
        message = str(exc)
        found, _, fix = message.partition("; ")
        return Check("docker", False, found, fix or message, required=False)
    return Check("docker", True, f"engine {e.server_version} at {e.host}, compose {e.compose_version}", required=False)


def check_prometheus() -> Check:
    from pulsarlab.monitoring.prometheus import INSTALL_HINT, MonitoringError, find_binary

    try:
        return Check("prometheus", True, find_binary(), required=False)
    except MonitoringError:
        return Check("prometheus", False, "no prometheus: only 'monitoring up' and 'up --monitoring' need it",
                     INSTALL_HINT, required=False)


def run(topology: str = "smoke") -> list[Check]:
    """Every check, in the order a new user needs them."""
    topo = load(topology)
    return [check_java(), check_javac(), check_maven(), check_distribution(), check_memory(topo), check_ports(topo),
            check_docker(), check_prometheus()]
