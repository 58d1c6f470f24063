"""On JDK 25 and newer the nodes' class archives are AOT caches (pulsarlab.classdata): a first
cluster records one per role while it runs and writes them at its `down`; the next maps them and
serves. Run through the CLI with the machine's second JDK as a user selects it (`JAVA_HOME`), and
with a cache folder of its own, so the recording happens here whatever earlier runs left."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from pulsarlab import settings

pytestmark = pytest.mark.cluster


def newer_jdk() -> Path | None:
    """A JDK of release 25 or newer installed beside the default one, if any."""
    for home in sorted(Path("/usr/lib/jvm").glob("*")):
        java = home / "bin" / "java"
        if not java.is_file():
            continue
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60).stderr
        m = re.search(r'version "(\d+)', out)
        if m and int(m.group(1)) >= 25:
            return home
    return None


def jvm_args(state: Path) -> dict[str, list[str]]:
    nodes = json.loads((state / "state.json").read_text())["nodes"]
    return {name: psutil.Process(rec["pid"]).cmdline() for name, rec in nodes.items()}


def test_the_first_cluster_records_each_roles_aot_cache_and_the_next_maps_it(cluster_pool, tmp_path: Path) -> None:
    jdk = newer_jdk()
    if jdk is None:
        pytest.skip("no JDK 25 or newer under /usr/lib/jvm")
    cluster_pool.close()  # the pool's smoke binds the same addresses
    real_cache = settings.current().cache_dir
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "pulsar").symlink_to(real_cache / "pulsar")  # the distribution, not downloaded again
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX", "127.0")
    topology = tmp_path / "tiny.yaml"
    topology.write_text(yaml.safe_dump({
        "name": "tiny", "regions": ["local"], "address_prefix": prefix,
        "nodes": [{"name": "zk", "role": "zookeeper", "region": "local"},
                  {"name": "bk1", "role": "bookie", "cluster": "tiny", "region": "local"},
                  {"name": "pulsar1", "role": "broker", "cluster": "tiny", "region": "local"}],
        "clusters": [{"name": "tiny", "persistence": {"ensemble": 1, "write_quorum": 1, "ack_quorum": 1}}],
        "tenants": [{"name": "tiny", "clusters": ["tiny"]}],
        "namespaces": [{"name": "tiny/test"}],
    }))
    env = {**os.environ, "JAVA_HOME": str(jdk), "PULSARLAB_CACHE": str(cache)}
    state = tmp_path / "state"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "pulsarlab.cli", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"pulsarlab {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    try:
        cli("up", "--topology", str(topology), "--state-dir", str(state))  # a message round trip included
        recording = {n: [a for a in args if a.startswith("-XX:AOTCacheOutput=")] for n, args in jvm_args(state).items()}
        assert all(len(r) == 1 for r in recording.values()), recording
        cli("down", "--state-dir", str(state))
        [folder] = (cache / "cds").glob("4.0.*-java*")
        assert {p.name for p in folder.glob("*.aot")} == {"zookeeper.aot", "bookie.aot", "broker.aot", "init.aot"}
        assert not list(folder.glob("*.part*")), "a recording left behind"
        assert all(p.stat().st_size > 10_000_000 for p in folder.glob("*.aot"))

        cli("up", "--topology", str(topology), "--state-dir", str(state))
        role = {"zk": "zookeeper", "bk1": "bookie", "pulsar1": "broker"}
        for name, args in jvm_args(state).items():
            assert f"-XX:AOTCache={folder / role[name]}.aot" in args, (name, args)
            # this start's part of the log: the JVM warns there when it cannot use a cache
            log = (state / "nodes" / name / "logs" / "node.log").read_text().rsplit("===== pulsarlab: starting", 1)[-1]
            assert "[aot]" not in log, (name, [line for line in log.splitlines() if "[aot]" in line][:5])
    finally:
        subprocess.run([sys.executable, "-m", "pulsarlab.cli", "down", "--state-dir", str(state)], env=env,
                       capture_output=True, timeout=600)
