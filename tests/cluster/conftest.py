"""Cluster-tier fixtures shared by the docker tests."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsarlab import ops
from pulsarlab.errors import DockerEngineError
from pulsarlab.runtime.docker import engine, image
from pulsarlab.runtime.docker.cluster import DockerCluster
from tests.cluster.ansible_hosts import docker
from tests.topology_files import builtin_at

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-engine"


@pytest.fixture(scope="session")
def docker_host() -> Iterator[str]:
    """The engine at DOCKER_HOST (as `.ci/run` starts it); else one started here with
    ``scripts/docker-engine start`` and stopped at the end (only if started here)."""
    try:
        yield engine.check().host
        return
    except DockerEngineError:
        pass
    proc = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"scripts/docker-engine start failed:\n{proc.stderr[-3000:]}"
    m = re.search(r"DOCKER_HOST=(\S+)", proc.stdout)
    assert m, proc.stdout
    try:
        yield engine.check(m.group(1)).host
    finally:
        subprocess.run([str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)


@contextlib.contextmanager
def without_own_image(host: str) -> Iterator[str]:
    """The engine as a fresh machine's, without pulsarlab's image: its tag removed meanwhile (kept
    under another, so that a build finds its layers cached), put back at the end if nothing built it."""
    tag = image.ensure_image(host=host).tag
    keep = f"{tag}-kept-by-test-{os.getpid()}"
    for args in (("tag", tag, keep), ("image", "rm", tag)):
        proc = docker(host, *args)
        assert proc.returncode == 0, proc.stderr
    try:
        yield tag
    finally:
        if not engine.client(host).image.exists(tag):
            docker(host, "tag", keep, tag)
        docker(host, "image", "rm", keep)


@contextlib.contextmanager
def docker_deployment(topology: str, host: str, pool, root: Path, secure: bool = False,
                      said: list[str] | None = None) -> Iterator[DockerCluster]:
    """``topology`` up (and configured) on the docker runtime under ``root`` (with the secure
    profile if ``secure``), down at the end. With ``said`` (what ``up`` said goes there too), the
    engine is as the caller left it (:func:`without_own_image`: up builds the image); else the
    image is built first if its inputs changed. The local cluster the pool holds goes first: the
    containers bind the same addresses."""
    pool.close()
    if said is None:
        image.ensure_image(host=host)  # a new distribution or Dockerfile: built again
    t0 = time.monotonic()
    prefix = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX")  # beside another lane's clusters
    ref = str(builtin_at(topology, prefix, root)) if prefix else topology

    def say(text: str) -> None:
        print(text)
        if said is not None:
            said.append(text)

    _, cluster = ops.up(ref, runtime="docker", state_dir=root / topology, say=say, secure=secure)
    print(f"docker {topology}{' (secure)' if secure else ''} ready and configured in {time.monotonic() - t0:.1f}s")
    try:
        yield cluster
    finally:
        if (cluster.state_dir / "state.json").is_file():
            cluster.down()
