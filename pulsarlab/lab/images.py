"""The rehearsal hosts' images, built on first use from pulsarlab's Debian base (no registry).

Three kinds of machine, as operators meet them:

- ``plain``: Debian with Python (for Ansible's modules), OpenSSH, iptables and Java 17; sshd is
  its first process (no service manager: the playbooks use the distribution's daemon script).
- ``systemd``: the same with systemd as the first process (the playbooks install units).
- ``bare``: a new machine with Python, OpenSSH and iptables but no Java. Its apt points at a
  package mirror inside the machine (the lab's network has no route out, as many data centers
  have none): ``deploy.yml`` installs Debian's Java from it as it would from the site's mirror.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from python_on_whales import DockerClient, DockerException

from pulsarlab.distribution import file_lock
from pulsarlab.errors import ImageBuildError
from pulsarlab.progress import Reporter
from pulsarlab.runtime.docker.image import docker_dir, ensure_base

KINDS = ("plain", "systemd", "bare")
INPUTS_LABEL = "org.pulsarlab.lab-inputs"
SSH = "openssh-server iptables procps python3"

_PLAIN = f"""\
FROM {{base}}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {SSH} openjdk-17-jre-headless \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh
CMD ["/usr/sbin/sshd", "-D", "-e"]
"""
_SYSTEMD = """\
FROM {plain}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd systemd-sysv dbus \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* && systemctl enable ssh
STOPSIGNAL SIGRTMIN+3
CMD ["/sbin/init"]
"""
# the mirror holds what the playbooks install on a machine without them (Java and procps; python3-apt,
# which Ansible's apt module installs first), with every package they need that the machine lacks;
# its package lists are read at build time, as a host's apt would have them
_BARE = """\
FROM {base}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssh-server iptables python3 apt-utils \\
 && mkdir -p /srv/mirror && cd /srv/mirror \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --download-only --no-install-recommends \\
    openjdk-17-jre-headless procps python3-apt \\
 && mv /var/cache/apt/archives/*.deb . && apt-ftparchive packages . > Packages \\
 && rm -rf /etc/apt/sources.list /etc/apt/sources.list.d/* /var/lib/apt/lists/* \\
 && echo 'deb [trusted=yes] file:/srv/mirror ./' > /etc/apt/sources.list && apt-get update -qq \\
 && mkdir -p /run/sshd /root/.ssh && chmod 700 /root/.ssh
CMD ["/usr/sbin/sshd", "-D", "-e"]
"""


def tag(kind: str) -> str:
    return "pulsarlab/lab-host:bookworm" if kind == "plain" else f"pulsarlab/lab-host-{kind}:bookworm"


def _inputs(text: str, base_id: str) -> str:
    return hashlib.sha256(f"{base_id}\n{text}".encode()).hexdigest()[:16]


def _ensure(docker: DockerClient, kind: str, text: str, base_id: str, progress: Reporter) -> str:
    """The image ``kind`` built from ``text`` (on ``base_id``) unless one with the same inputs is there."""
    name, inputs = tag(kind), _inputs(text, base_id)
    if docker.image.exists(name) and (docker.image.inspect(name).config.labels or {}).get(INPUTS_LABEL) == inputs:
        return docker.image.inspect(name).id
    with progress.step(f"image-{kind}", f"host image {name}", "building (apt from Debian's mirror)", "built"):
        ctx = Path(tempfile.mkdtemp(prefix="lab-context-", dir=docker_dir()))
        try:
            (ctx / "Dockerfile").write_text(text)
            img = docker.legacy_build(ctx, tags=[name], network="host", quiet=True, labels={INPUTS_LABEL: inputs})
        except DockerException as exc:
            tail = "\n".join(str(exc).strip().splitlines()[-25:])
            raise ImageBuildError(f"docker build of {name} failed:\n{tail}") from None
        finally:
            shutil.rmtree(ctx, ignore_errors=True)
    return img.id


def ensure_images(docker: DockerClient, kinds: set[str], progress: Reporter) -> dict[str, str]:
    """Tag of each image kind asked for, built (with what it is built on) where missing or stale."""
    docker_dir().mkdir(parents=True, exist_ok=True)
    with file_lock(docker_dir() / "lab-image-build.lock"):
        base_tag, base_id = ensure_base(docker)
        built: dict[str, str] = {}
        if kinds & {"plain", "systemd"}:
            built["plain"] = _ensure(docker, "plain", _PLAIN.format(base=base_tag), base_id, progress)
        if "systemd" in kinds:
            _ensure(docker, "systemd", _SYSTEMD.format(plain=tag("plain")), built["plain"], progress)
        if "bare" in kinds:
            _ensure(docker, "bare", _BARE.format(base=base_tag), base_id, progress)
    return {k: tag(k) for k in kinds}
