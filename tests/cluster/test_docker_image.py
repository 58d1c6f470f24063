"""`pulsarlab image build` on a real Docker engine: a runnable Pulsar image, cached by its inputs.

Needs root and the engine: the module starts it with ``scripts/docker-engine start`` when none
answers and leaves it as it found it (stops it only if it started it). Run under the cluster lock.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from pulsarlab import distribution
from pulsarlab.errors import ImageMissingError
from pulsarlab.runtime.docker import engine, image


@pytest.fixture(scope="module")
def built(docker_host: str) -> image.ImageResult:
    return image.ensure_image(host=docker_host)


def _run(docker_host: str, tag: str, *cmd: str) -> str:
    docker = engine.client(docker_host)
    return str(docker.run(tag, list(cmd), remove=True))


def test_image_runs_pulsar_from_the_local_distribution(docker_host: str, built: image.ImageResult) -> None:
    dist = distribution.resolve()
    assert built.pulsar_version == dist.version
    assert dist.version in _run(docker_host, built.tag, "bin/pulsar", "version")
    assert 'version "17' in _run(docker_host, built.tag, "sh", "-c", "java -version 2>&1")
    # the official layout: /pulsar holding the same jars, PULSAR_HOME, working dir /pulsar
    listing = _run(docker_host, built.tag, "sh", "-c", 'echo "$PULSAR_HOME $(pwd)"; ls /pulsar/lib').split()
    assert listing[:2] == ["/pulsar", "/pulsar"]
    assert sorted(listing[2:]) == sorted(p.name for p in (dist.home / "lib").iterdir())
    # like the official image: an unnamed non-root user in the root group that may write data, logs, conf
    writes = "id -u; id -g; for d in data logs conf; do touch /pulsar/$d/probe && echo ok; done"
    assert _run(docker_host, built.tag, "sh", "-c", writes).split() == ["10000", "0", "ok", "ok", "ok"]


def test_second_build_with_same_inputs_does_nothing(docker_host: str, built: image.ImageResult) -> None:
    again = image.ensure_image(host=docker_host)
    assert not again.built
    assert again.image_id == built.image_id and again.tag == built.tag
    assert again.seconds < 15, f"a cached build took {again.seconds:.1f}s"


def test_changed_distribution_rebuilds(docker_host: str, built: image.ImageResult, tmp_path: Path) -> None:
    dist = distribution.resolve()
    copy = tmp_path / "pulsar"
    shutil.copytree(dist.home, copy, symlinks=True, copy_function=os.link)  # hard links: instant
    marker = f"# changed by test {time.time_ns()}\n"
    conf = copy / "conf" / "broker.conf"
    text = conf.read_text()
    conf.unlink()  # a new file, so the shared cache copy stays untouched
    conf.write_text(text + marker)
    tag = f"pulsarlab/pulsar:test-changed-{os.getpid()}"
    docker = engine.client(docker_host)
    try:
        changed = image.ensure_image(distribution=copy, tag=tag, host=docker_host)
        assert changed.built and changed.image_id != built.image_id
        assert marker.strip() in _run(docker_host, tag, "tail", "-n", "1", "conf/broker.conf")
    finally:
        if docker.image.exists(tag):
            docker.image.remove(tag, force=True)


def test_missing_image_names_the_fix(docker_host: str) -> None:
    with pytest.raises(ImageMissingError) as info:
        engine.require_image("pulsarlab/pulsar:0.0.0-absent", host=docker_host)
    assert "pulsarlab image build" in str(info.value) and "--image" in str(info.value)
