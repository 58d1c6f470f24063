"""Class-data sharing archives: which JVM records, which maps, and when a recording is kept."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from pulsarlab.classdata import STALE_SECONDS, ClassArchives
from pulsarlab.distribution import Distribution, Java
from pulsarlab.runtime.cds import class_archives, classpath_dir, node_recording
from pulsarlab.runtime.jvm import BOOKIE_DEFAULT_OPTS
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.topology import Role, load


@pytest.fixture
def dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Distribution:
    monkeypatch.setenv("PULSARLAB_CACHE", str(tmp_path / "cache"))
    return Distribution(tmp_path / "pulsar", "4.0.8", Java(None, sys.executable, 17))


def opts(env: dict[str, str]) -> list[str]:
    return shlex.split(env["PULSAR_EXTRA_OPTS"])


def test_first_start_records_then_every_start_maps(dist: Distribution, tmp_path: Path) -> None:
    archives = class_archives(dist)
    part = node_recording(archives, "broker", "pulsar1", tmp_path)
    assert archives.jvm_options("broker", None) == ""
    assert archives.jvm_options("broker", part) == f"-XX:ArchiveClassesAtExit={part}"

    part.write_bytes(b"classes")
    assert archives.settle("broker", part, clean_exit=True) == archives.archive("broker")
    assert not part.exists() and archives.archive("broker").read_bytes() == b"classes"
    shared = f"-XX:SharedArchiveFile={archives.archive('broker')} -Xshare:auto"
    assert archives.jvm_options("broker", None) == shared
    assert archives.jvm_options("broker", part) == shared  # nothing recorded once there is one


def test_on_jdk_25_the_nodes_record_and_map_an_aot_cache(dist: Distribution, tmp_path: Path) -> None:
    """JDK 25 writes an AOT cache in the run that records it (JEP 514): the nodes use one instead
    of a dynamic CDS archive; the same cycle, under a name of its own; a configuration the JVM
    left behind when it was killed goes with the recording."""
    archives = class_archives(Distribution(dist.home, dist.version, Java(None, sys.executable, 25)))
    part = node_recording(archives, "broker", "pulsar1", tmp_path)
    assert archives.jvm_options("broker", part) == f"-XX:AOTCacheOutput={part}"
    part.with_name(part.name + ".config").write_bytes(b"")
    assert archives.settle("broker", part, clean_exit=False) is None
    assert list(archives.root.glob("broker.*")) == []

    part.write_bytes(b"cache")
    assert archives.settle("broker", part, clean_exit=True) == archives.archive("broker")
    assert archives.archive("broker").name == "broker.aot"
    assert archives.jvm_options("broker", part) == f"-XX:AOTCache={archives.archive('broker')}"


@pytest.mark.parametrize("major", [17, 21, 24])
def test_before_jdk_25_and_for_other_programs_the_archives_stay_dynamic_cds(dist: Distribution, tmp_path: Path,
                                                                           major: int) -> None:
    nodes = class_archives(Distribution(dist.home, dist.version, Java(None, sys.executable, major)))
    other = ClassArchives.for_java("driver-x", tmp_path, sys.executable, 25)  # a program that did not ask for AOT
    for archives in (nodes, other):
        part = archives.recording("broker", "one")
        assert archives.jvm_options("broker", part) == f"-XX:ArchiveClassesAtExit={part}"
        assert archives.archive("broker").suffix == ".jsa"


def test_a_recording_is_kept_only_from_a_clean_exit(dist: Distribution, tmp_path: Path) -> None:
    archives = class_archives(dist)
    part = node_recording(archives, "bookie", "bk1", tmp_path)
    part.write_bytes(b"half written")
    assert archives.settle("bookie", part, clean_exit=False) is None
    assert not part.exists() and not archives.archive("bookie").exists()
    part.write_bytes(b"")
    assert archives.settle("bookie", part, clean_exit=True) is None
    assert not archives.archive("bookie").exists()
    assert archives.settle("bookie", part, clean_exit=True) is None  # nothing recorded: nothing to do


def test_stale_recordings_are_dropped(dist: Distribution, tmp_path: Path) -> None:
    archives = class_archives(dist)
    old = node_recording(archives, "zookeeper", "zk", tmp_path / "gone")
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_bytes(b"x")
    past = time.time() - STALE_SECONDS - 60
    os.utime(old, (past, past))
    archives.jvm_options("zookeeper", node_recording(archives, "zookeeper", "zk", tmp_path))
    assert not old.exists()


def test_archives_of_an_install_folder_that_is_gone_are_dropped_when_another_records(dist: Distribution, tmp_path: Path) -> None:
    """A throw-away venv's PySpark (or a removed distribution) leaves archives no JVM can map: the
    next recording removes them; those of folders that still exist stay."""
    kept_home, gone_home = tmp_path / "kept", tmp_path / "gone-venv"
    kept_home.mkdir(), gone_home.mkdir()
    kept, gone = (ClassArchives.for_java("spark-4.3.0", h, dist.java.executable) for h in (kept_home, gone_home))
    for a in (kept, gone):
        a.recording("driver", "pid1")  # notes the install folder
        a.archive("driver").write_bytes(b"archive")
    gone_home.rmdir()
    ClassArchives.for_java("spark-4.3.0", tmp_path, dist.java.executable).recording("driver", "pid2")
    assert not gone.root.exists() and kept.archive("driver").is_file()


def test_archives_are_kept_per_distribution_folder_version_and_jdk(dist: Distribution, tmp_path: Path) -> None:
    other_version = Distribution(dist.home, "4.0.9", dist.java)
    fake_java = tmp_path / "java"
    fake_java.write_text("#!/bin/sh\n")
    other_jdk = Distribution(dist.home, dist.version, Java(None, str(fake_java), 17))
    other_folder = Distribution(tmp_path / "elsewhere", dist.version, dist.java)  # same release, other jars' paths
    roots = {class_archives(d).root for d in (dist, other_version, other_jdk, other_folder)}
    assert len(roots) == 4


def test_every_node_has_one_classpath_and_its_own_log_configuration(dist: Distribution, tmp_path: Path) -> None:
    topo = load("sync")
    cluster = LocalCluster(topo, tmp_path / "state", dist)
    archives = class_archives(dist)
    for node in topo.nodes:
        env = cluster._env(node, node.role.value)
        assert Path(env["PULSAR_LOG_CONF"]).parent == classpath_dir(archives)  # bin/pulsar's first classpath entry
        assert not any(classpath_dir(archives).iterdir())  # it must stay empty for the archive to be usable
        own = cluster.dirs(node).conf / "log4j2.yaml"
        assert f"-Dlog4j.configurationFile={own}" in opts(env)
        recording = [o for o in opts(env) if o.startswith("-XX:ArchiveClassesAtExit=")]
        first = topo.nodes_of(node.role)[0]
        assert bool(recording) == (node.name == first.name), node.name
        assert env["BOOKIE_EXTRA_OPTS"] == f"{BOOKIE_DEFAULT_OPTS} {env['PULSAR_EXTRA_OPTS']}"


def test_without_class_sharing_nothing_changes(dist: Distribution, tmp_path: Path) -> None:
    topo = load("smoke").model_copy(deep=True)
    topo.jvm.class_sharing = False
    cluster = LocalCluster(topo, tmp_path / "state", dist)
    for node in topo.nodes:
        env = cluster._env(node, node.role.value)
        assert Path(env["PULSAR_LOG_CONF"]) == cluster.dirs(node).conf / "log4j2.yaml"
        assert not [o for o in opts(env) if o.startswith("-XX:") and "Archive" in o]
    assert cluster._recording(Role.ZOOKEEPER.value, topo.nodes_of(Role.ZOOKEEPER)[0]) is None
