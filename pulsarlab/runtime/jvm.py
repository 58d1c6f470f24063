"""The JVM settings of a node, the same on every runtime: small heaps, a quick-starting GC."""

from __future__ import annotations

import socket
from pathlib import PurePath

from pulsarlab.render import NodeDirs
from pulsarlab.topology import Node, Role, Topology
from pulsarlab.topology.settings import effective_jvm_options

BOOKIE_DEFAULT_OPTS = "-Dio.netty.leakDetection.level=disabled"  # the distribution's conf/bkenv.sh


def jvm_env(topo: Topology, node: Node, extra_opts: str = "") -> dict[str, str]:
    """The environment ``bin/pulsar`` reads for memory, GC and extra JVM options (both the
    ``PULSAR_*`` and ``BOOKIE_*`` names: the bookie script reads the latter), the topology's
    ``jvm_options`` among the extra ones."""
    heap, direct = heap_and_direct_mb(topo, node)
    mem = f"-Xms{min(heap, 64)}m -Xmx{heap}m -XX:MaxDirectMemorySize={direct}m"
    gc = "-XX:+UseSerialGC -XX:+PerfDisableSharedMem -XX:ReservedCodeCacheSize=64m"
    if topo.jvm.fast_start:
        gc += " -XX:TieredStopAtLevel=1"
    extra = f"-Dpulsarlab.node={node.name} -Dpulsar.allocator.exit_on_oom=true -Dio.netty.recycler.maxCapacityPerThread=4096"
    if extra_opts:
        extra += f" {extra_opts}"
    # the topology's jvm_options last: an option later on the command line wins (top < cluster < node)
    for setting in effective_jvm_options(topo.settings_levels(node), node.role.value).values():
        extra += f" {setting.text}"
    return {
        "PULSAR_MEM": mem, "BOOKIE_MEM": mem, "PULSAR_GC": gc, "BOOKIE_GC": gc,
        "PULSAR_GC_LOG": " ", "BOOKIE_GC_LOG": " ",
        # a bookie without Netty's leak detection, as the distribution's bkenv.sh starts one (setting
        # BOOKIE_EXTRA_OPTS replaces that default, so it is written here again)
        "PULSAR_EXTRA_OPTS": extra, "BOOKIE_EXTRA_OPTS": f"{BOOKIE_DEFAULT_OPTS} {extra}",
    }


def memory_limit_mb(topo: Topology, node: Node, overhead_mb: int = 192) -> int:
    """What a node's JVM may use in all: heap, direct memory and some room for the rest."""
    heap, direct = heap_and_direct_mb(topo, node)
    return heap + direct + overhead_mb


def heap_and_direct_mb(topo: Topology, node: Node) -> tuple[int, int]:
    j = topo.jvm
    return {
        Role.ZOOKEEPER: (j.zookeeper_heap_mb, 64),
        Role.BOOKIE: (j.bookie_heap_mb, j.bookie_direct_mb),
        Role.BROKER: (j.broker_heap_mb, j.broker_direct_mb),
    }[node.role]


def hosts_text(topo: Topology, node: Node) -> str:
    """A hosts file in which this machine's name resolves to the node's own address.

    BookKeeper's placement policy finds a broker's region from ``InetAddress.getLocalHost()``; every
    node on one machine (and every host-network container) shares the machine's name, so each
    broker gets its own view through ``-Djdk.net.hosts.file`` and the rack map can tell them apart.
    """
    hostname = socket.gethostname()
    lines = [f"{topo.address_of(node)} {hostname}"]
    if hostname != "localhost":
        lines.append("127.0.0.1 localhost")
    return "\n".join(lines) + "\n"


def log_conf_off_the_classpath(env: dict[str, str], empty_dir: PurePath) -> None:
    """Keep the classpath the same for every JVM that shares a class archive (an archive is bound
    to it): ``bin/pulsar`` and ``bin/pulsar-admin`` put the folder of ``PULSAR_LOG_CONF`` first on
    it, so that becomes ``empty_dir`` and log4j is told the real file by name (a later ``-D`` wins
    over the script's own)."""
    log_conf = env["PULSAR_LOG_CONF"]
    env["PULSAR_LOG_CONF"] = str(empty_dir / "log4j2.yaml")
    for key in ("PULSAR_EXTRA_OPTS", "BOOKIE_EXTRA_OPTS"):
        if key in env:
            env[key] = f"{env[key]} -Dlog4j.configurationFile={log_conf}".strip()


def pulsar_env(topo: Topology, node: Node, dirs: NodeDirs) -> dict[str, str]:
    """What ``bin/pulsar`` reads, for a node whose files are at ``dirs`` (host or container paths)."""
    extra = f"-Djdk.net.hosts.file={dirs.conf / 'hosts'}" if node.role == Role.BROKER else ""
    env = jvm_env(topo, node, extra)
    env.update({
        "PULSAR_LOG_CONF": str(dirs.conf / "log4j2.yaml"), "PULSAR_LOG_DIR": str(dirs.logs),
        "PULSAR_LOG_APPENDER": "Console",
        "PULSAR_ZK_CONF": str(dirs.conf_file(Role.ZOOKEEPER)),
        "PULSAR_BOOKKEEPER_CONF": str(dirs.conf_file(Role.BOOKIE)),
        "PULSAR_BROKER_CONF": str(dirs.conf_file(Role.BROKER)),
    })
    return env
