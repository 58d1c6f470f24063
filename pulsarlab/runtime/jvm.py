"""The JVM settings of a node, the same on every runtime: small heaps, a quick-starting GC."""

from __future__ import annotations

from pulsarlab.topology import Node, Role, Topology


def jvm_env(topo: Topology, node: Node, extra_opts: str = "") -> dict[str, str]:
    """The environment ``bin/pulsar`` reads for memory, GC and extra JVM options (both the
    ``PULSAR_*`` and ``BOOKIE_*`` names: the bookie script reads the latter)."""
    heap, direct = heap_and_direct_mb(topo, node)
    mem = f"-Xms{min(heap, 64)}m -Xmx{heap}m -XX:MaxDirectMemorySize={direct}m"
    gc = "-XX:+UseSerialGC -XX:+PerfDisableSharedMem -XX:ReservedCodeCacheSize=64m"
    if topo.jvm.fast_start:
        gc += " -XX:TieredStopAtLevel=1"
    extra = f"-Dpulsarlab.node={node.name} -Dpulsar.allocator.exit_on_oom=true -Dio.netty.recycler.maxCapacityPerThread=4096"
    if extra_opts:
        extra += f" {extra_opts}"
    return {
        "PULSAR_MEM": mem, "BOOKIE_MEM": mem, "PULSAR_GC": gc, "BOOKIE_GC": gc,
        "PULSAR_GC_LOG": " ", "BOOKIE_GC_LOG": " ",
        "PULSAR_EXTRA_OPTS": extra, "BOOKIE_EXTRA_OPTS": extra,
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
