"""Where a node's JVM unpacks its native libraries: its own folder, not the machine's /tmp."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from pulsarlab.distribution import Distribution, Java
from pulsarlab.runtime.local import LocalCluster, node_tmp
from pulsarlab.topology import Role, load


def test_bookies_and_brokers_unpack_into_their_own_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bookie's RocksDB library and the checksum library of every BookKeeper client (bookies and
    brokers) are unpacked at each start and left behind by a killed JVM: in the node's data folder
    they go with it (emptied at the next start, wiped by down); ZooKeeper unpacks none."""
    monkeypatch.setenv("PULSARLAB_CACHE", str(tmp_path / "cache"))
    dist = Distribution(tmp_path / "pulsar", "4.0.8", Java(None, sys.executable, 17))
    topo = load("sync")
    cluster = LocalCluster(topo, tmp_path / "state", dist)
    for node in topo.nodes:
        env = cluster._env(node, node.role.value)
        tmp = [o for o in shlex.split(env["PULSAR_EXTRA_OPTS"]) if o.startswith("-Djava.io.tmpdir=")]
        if node.role == Role.ZOOKEEPER:
            assert tmp == [], node.name
        else:
            assert tmp == [f"-Djava.io.tmpdir={node_tmp(cluster.dirs(node))}"], node.name
            assert node_tmp(cluster.dirs(node)).is_relative_to(cluster.dirs(node).data)
