"""Container hosts for the playbooks: one container per node of a Debian image with Python (for
Ansible's modules) and Java 17, on the host's network so that each node binds its own loopback
address; Ansible reaches them through the docker connection plugin (community.docker). Hosts
named in ``systemd`` run systemd as their first process (the playbooks then install and drive
units); the others have no service manager (the playbooks use the distribution's daemon script)."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.distribution import DEFAULT_VERSION
from pulsarlab.runtime.docker import engine, image
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
# the same with systemd as the first process (it runs unprivileged, in its container mode)
SYSTEMD_DOCKERFILE = f"""\
FROM {HOST_TAG}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
"""
SYSTEMD_TAG = f"pulsarlab/ansible-host-systemd:{DEFAULT_VERSION}"
# a new machine: Debian with Python and nothing else (the playbooks install Java from Debian)
BARE_DOCKERFILE = """\
FROM {base}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
CMD ["sleep", "infinity"]
"""
BARE_TAG = "pulsarlab/ansible-host-bare:bookworm"
SYSTEMD_RUN = ["-e", "container=docker", "--tmpfs", "/run", "--tmpfs", "/run/lock", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro"]
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def docker(host: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_HOST": host})


def ensure_host_image(host: str) -> str:
    if docker(host, "image", "inspect", HOST_TAG).returncode != 0:
        _build(host, HOST_TAG, DOCKERFILE.format(base=image.ensure_image(host=host).tag))
    if docker(host, "image", "inspect", SYSTEMD_TAG).returncode != 0:
        _build(host, SYSTEMD_TAG, SYSTEMD_DOCKERFILE)
    if docker(host, "image", "inspect", BARE_TAG).returncode != 0:
        _build(host, BARE_TAG, BARE_DOCKERFILE.format(base=image.ensure_base(engine.client(host))[0]))
    return HOST_TAG


def _build(host: str, tag: str, dockerfile: str) -> None:
    proc = subprocess.run(["docker", "build", "--network", "host", "-t", tag, "-"], input=dockerfile,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "DOCKER_HOST": host})
    assert proc.returncode == 0, f"building {tag} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"


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
    """One container per node of ``topo``, named ``<prefix>-<node>``; those of ``systemd`` run it,
    those of ``bare`` have no Java."""

    def __init__(self, topo: Topology, docker_host: str, prefix: str, systemd: frozenset[str] = frozenset(),
                 bare: frozenset[str] = frozenset()) -> None:
        self.topo, self.docker_host, self.prefix, self.systemd, self.bare = topo, docker_host, prefix, systemd, bare

    def name(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def start(self) -> None:
        ensure_host_image(self.docker_host)
        self.remove()
        for n in self.topo.nodes:
            self._run(n.name)

    def _run(self, node: str, bare: bool = False) -> None:
        # --init: a JVM that exits is reaped (the daemon script checks its pid); systemd reaps its own
        if node in self.systemd:
            how = [*SYSTEMD_RUN, SYSTEMD_TAG]
        else:
            how = ["--init", BARE_TAG if bare or node in self.bare else HOST_TAG]
        proc = docker(self.docker_host, "run", "-d", "--name", self.name(node), "--network", "host", *how)
        assert proc.returncode == 0, proc.stderr

    def replace(self, node: str) -> None:
        """The machine of ``node`` lost (its container removed with everything on it) and a new
        one in its place: same name and address, the hosts' base image (Java, no Pulsar). That the
        plays install Java on a host without it is shown by the deploy's bare host."""
        docker(self.docker_host, "rm", "-f", self.name(node))
        self._run(node)

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
        play = Play(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0)
        if log := os.environ.get("PULSARLAB_TEST_PLAY_LOG"):  # every play's output, for profiling
            with open(log, "a") as f:
                f.write(f"\n##### {' '.join(cmd[3:])} rc={play.rc} {play.seconds:.1f}s\n{play.output}")
        return play
