"""Container hosts for the playbooks: one container per node of a Debian image with Python (for
Ansible's modules) and Java 17, on the host's network so that each node binds its own loopback
address; Ansible reaches them through the docker connection plugin (community.docker)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.distribution import DEFAULT_VERSION
from pulsarlab.runtime.docker import image
from pulsarlab.topology import Topology

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
# the Pulsar image's Debian with Java 17, without its /pulsar: the playbooks install the distribution
DOCKERFILE = """\
FROM {base}
USER root
RUN rm -rf /pulsar && apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /
CMD ["sleep", "infinity"]
"""
HOST_TAG = f"pulsarlab/ansible-host:{DEFAULT_VERSION}"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def docker(host: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_HOST": host})


def ensure_host_image(host: str) -> str:
    if docker(host, "image", "inspect", HOST_TAG).returncode != 0:
        base = image.ensure_image(host=host).tag
        proc = subprocess.run(["docker", "build", "--network", "host", "-t", HOST_TAG, "-"],
                              input=DOCKERFILE.format(base=base), capture_output=True, text=True, timeout=900,
                              env={**os.environ, "DOCKER_HOST": host})
        assert proc.returncode == 0, f"building {HOST_TAG} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return HOST_TAG


@dataclass
class Play:
    rc: int
    output: str
    seconds: float

    def recap(self) -> dict[str, dict[str, int]]:
        """Per host: ok, changed, unreachable, failed (from the PLAY RECAP)."""
        return {m[1]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()[1:]), strict=True))
                for m in RECAP.finditer(self.output)}


class ContainerHosts:
    """One container per node of ``topo``, named ``<prefix>-<node>``."""

    def __init__(self, topo: Topology, docker_host: str, prefix: str) -> None:
        self.topo, self.docker_host, self.prefix = topo, docker_host, prefix

    def name(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def start(self) -> None:
        tag = ensure_host_image(self.docker_host)
        self.remove()
        for n in self.topo.nodes:  # --init: a JVM that exits is reaped (the daemon script checks its pid)
            proc = docker(self.docker_host, "run", "-d", "--init", "--name", self.name(n.name), "--network", "host", tag)
            assert proc.returncode == 0, proc.stderr

    def remove(self) -> None:
        for n in self.topo.nodes:
            docker(self.docker_host, "rm", "-f", self.name(n.name))

    def connect(self, render_dir: Path) -> None:
        """Host variables beside the inventory: each host is reached in its container."""
        for n in self.topo.nodes:
            path = render_dir / "host_vars" / f"{n.name}.yml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"ansible_connection: community.docker.docker\nansible_docker_host: {self.name(n.name)}\n")

    def playbook(self, inventory: Path, book: str, *extra: str, timeout: float = 1200) -> Play:
        """``ansible-playbook`` against the containers (see :meth:`connect`)."""
        env = {**os.environ, "DOCKER_HOST": self.docker_host, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
               "PYTHONPATH": os.pathsep.join([str(PLAYBOOKS.parent), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        cmd = ["ansible-playbook", "-i", str(inventory), str(PLAYBOOKS / book), *extra]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return Play(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0)
