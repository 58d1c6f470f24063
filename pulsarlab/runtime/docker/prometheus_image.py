"""A Prometheus image from Debian's ``prometheus`` package on the same Debian base as the Pulsar
image: the monitoring of ``compose/*.yml`` where no registry serves the official image."""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

from python_on_whales import DockerException

from pulsarlab.distribution import file_lock
from pulsarlab.errors import ImageBuildError
from pulsarlab.runtime.docker import engine
from pulsarlab.runtime.docker.image import INPUTS_LABEL, ImageResult, Say, _quiet, docker_dir, ensure_base

TAG = "pulsarlab/prometheus:debian"
# wget: the compose file's health check (the official image has busybox's)
DOCKERFILE = """\
FROM {base}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus wget ca-certificates \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p /prometheus && chown 65534:65534 /prometheus
USER 65534
WORKDIR /prometheus
ENTRYPOINT ["prometheus"]
"""


def ensure_prometheus_image(tag: str = TAG, host: str | None = None, say: Say = _quiet) -> ImageResult:
    """The Prometheus image, built only when its base or Dockerfile changed."""
    t0 = time.monotonic()
    docker = engine.client(host)
    with file_lock(docker_dir() / "image-build.lock"):
        base_tag, base_id = ensure_base(docker, say)
        text = DOCKERFILE.format(base=base_tag)
        inputs = hashlib.sha256(f"{base_id}\n{text}".encode()).hexdigest()
        if docker.image.exists(tag):
            current = docker.image.inspect(tag)
            if (current.config.labels or {}).get(INPUTS_LABEL) == inputs:
                return ImageResult(tag, current.id, "", inputs, False, time.monotonic() - t0)
        say(f"building {tag}: Debian's prometheus package")
        with tempfile.TemporaryDirectory(prefix="context-", dir=docker_dir()) as ctx:
            (Path(ctx) / "Dockerfile").write_text(text)
            try:
                img = docker.legacy_build(ctx, tags=[tag], network="host", quiet=True, labels={INPUTS_LABEL: inputs})
            except DockerException as exc:
                tail = "\n".join(str(exc).strip().splitlines()[-25:])
                raise ImageBuildError(f"docker build of {tag} failed:\n{tail}") from None
    return ImageResult(tag, img.id, "", inputs, True, time.monotonic() - t0)
