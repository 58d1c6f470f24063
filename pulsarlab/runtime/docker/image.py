"""Pulsar images without a container registry.

``ensure_image`` makes an image laid out like the official ``apachepulsar/pulsar:<version>``
(``/pulsar`` with ``bin/ conf/ lib/``, ``PULSAR_HOME=/pulsar``, working dir ``/pulsar``, run as the
unnamed user 10000 in the root group, which may write ``conf/``, ``data/``, ``logs/``) from three
local inputs: a debootstrap Debian minbase root filesystem imported as a base image, Debian's Java 17
runtime installed on it, and the same Pulsar server distribution the local runtime uses. A label
carries a hash of the inputs, so a second build with the same inputs does nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from python_on_whales import DockerClient, DockerException

from pulsarlab import distribution as dist_mod
from pulsarlab.distribution import DEFAULT_VERSION, Distribution, cache_root, file_lock
from pulsarlab.errors import ImageBuildError
from pulsarlab.runtime.docker import engine

INPUTS_LABEL = "org.pulsarlab.inputs"
VERSION_LABEL = "org.pulsarlab.pulsar-version"
DEFAULT_REPOSITORY = "pulsarlab/pulsar"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_TIMEOUT = 900
BUILD_TIMEOUT = 1200
# runtime leftovers in a distribution folder: neither copied nor hashed
SKIPPED = {"logs", "data", dist_mod.VERIFIED_MARK}

Say = Callable[[str], None]

DOCKERFILE = """\
FROM {base}
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {packages} \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
ENV PULSAR_HOME=/pulsar \\
    PATH=/pulsar/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY pulsar/ /pulsar/
RUN mkdir -p /pulsar/data /pulsar/logs \\
 && chmod g=u /pulsar && chmod -R g=u /pulsar/conf /pulsar/data /pulsar/logs
WORKDIR /pulsar
USER 10000
CMD ["/bin/bash"]
"""
# procps: the Pulsar scripts call ps; curl: cheap HTTP health checks inside containers
PACKAGES = ("openjdk-17-jre-headless", "procps", "curl", "ca-certificates")


@dataclass(frozen=True)
class ImageResult:
    tag: str
    image_id: str
    pulsar_version: str
    inputs: str
    built: bool
    seconds: float


def docker_dir() -> Path:
    return cache_root() / "docker"


def default_tag(version: str) -> str:
    return f"{DEFAULT_REPOSITORY}:{version}"


def _quiet(_: str) -> None:
    pass


# ---- the base image: a Debian minbase root filesystem -------------------------------------------

def host_release() -> str:
    """The host's Debian codename (the base image's suite)."""
    text = Path("/etc/os-release").read_text() if Path("/etc/os-release").exists() else ""
    m = re.search(r"^VERSION_CODENAME=\"?(\w+)", text, re.M)
    return m.group(1) if m else "bookworm"


def apt_sources(suite: str, etc: Path = Path("/etc/apt")) -> tuple[str, list[Path]]:
    """The host's Debian mirror for ``suite`` and the source files that name it (copied into images)."""
    mirror, files = None, []
    candidates = ([etc / "sources.list"] if (etc / "sources.list").is_file() else []) + sorted(
        p for p in (etc / "sources.list.d").glob("*") if p.suffix in (".list", ".sources"))
    for path in candidates:
        text = path.read_text(errors="replace")
        found = None
        for stanza in re.split(r"\n\s*\n", text):  # deb822 stanzas
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.M))
            uris = fields.get("URIs", "").split()
            if uris and "deb" in fields.get("Types", "").split() and suite in fields.get("Suites", "").split():
                found = found or uris[0]
        for m in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):  # one-line form
            if m.group(2) == suite:
                found = found or m.group(1)
        if found:
            mirror = mirror or found
            files.append(path)
    return (mirror or DEFAULT_MIRROR), files


def _run(cmd: list[str], stage: str, timeout: float, **kw) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        raise ImageBuildError(f"{stage}: `{' '.join(cmd[:3])} ...` did not finish within {timeout:.0f}s") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise ImageBuildError(f"{stage}: `{' '.join(cmd[:3])} ...` failed with exit code {proc.returncode}\n{tail}")


def _rootfs_tarball(suite: str, say: Say) -> Path:
    """A cached tarball of a cleaned Debian minbase root filesystem."""
    tarball = docker_dir() / f"debian-{suite}-minbase.tar"
    if tarball.is_file():
        return tarball
    if os.geteuid() != 0:
        raise ImageBuildError("building the base image needs root (debootstrap makes device files and chroots)")
    debootstrap = shutil.which("debootstrap")
    if not debootstrap:
        raise ImageBuildError("debootstrap is not installed: run `scripts/docker-engine start` (it installs it) "
                              "or apt-get install debootstrap")
    mirror, sources = apt_sources(suite)
    say(f"base: debootstrap minbase {suite} from {mirror} (once per machine)")
    docker_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rootfs-", dir=docker_dir()))
    try:
        rootfs = work / "rootfs"
        _run([debootstrap, "--variant=minbase", suite, str(rootfs), mirror], "debootstrap", DEBOOTSTRAP_TIMEOUT)
        for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / leftover).glob("*"):
                if p.is_file():
                    p.unlink()
        if sources:  # the host's own apt configuration (incl. security updates) instead of debootstrap's line
            (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
            for src in sources:
                rel = src.relative_to("/") if src.is_absolute() else src
                shutil.copy2(src, rootfs / rel)
        partial = work / "rootfs.tar"
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], "packing the root filesystem", 600)
        partial.rename(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tarball


def ensure_base(docker: DockerClient, say: Say = _quiet) -> tuple[str, str]:
    """(tag, id) of the Debian minbase base image, imported from the cached root filesystem if absent."""
    suite = host_release()
    tag = f"pulsarlab/debian:{suite}-minbase"
    if docker.image.exists(tag):
        return tag, docker.image.inspect(tag).id
    tarball = _rootfs_tarball(suite, say)
    say(f"base: docker import {tarball.name}")
    try:
        img = docker.image.import_(tarball, tag=tag, changes=['CMD ["/bin/bash"]'])
    except DockerException as exc:
        raise ImageBuildError(f"docker import of {tarball} failed: {exc}") from None
    return tag, img.id


# ---- the Pulsar image ---------------------------------------------------------------------------

def _files(home: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(home):
        if Path(root) == home:
            dirs[:] = [d for d in dirs if d not in SKIPPED]
        dirs.sort()
        out += [Path(root) / f for f in sorted(files) if not (Path(root) == home and f in SKIPPED)]
    return out


def distribution_checksum(home: Path) -> str:
    """SHA-256 over the distribution's files (names and contents), memoised per (name, size, mtime) list."""
    files = _files(home)
    manifest = hashlib.sha256()
    for f in files:
        st = f.lstat()
        manifest.update(f"{f.relative_to(home)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    memo_file = docker_dir() / "distribution-checksums.json"
    memo = json.loads(memo_file.read_text()) if memo_file.is_file() else {}
    key = f"{home}:{manifest.hexdigest()}"
    if key in memo:
        return memo[key]
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.relative_to(home)}\0".encode())
        if f.is_symlink():
            h.update(os.readlink(f).encode())
        else:
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
    memo[key] = h.hexdigest()
    memo = dict(list(memo.items())[-16:])  # the newest few distributions are enough
    memo_file.parent.mkdir(parents=True, exist_ok=True)
    memo_file.write_text(json.dumps(memo, indent=1))
    return memo[key]


def dockerfile(base: str) -> str:
    return DOCKERFILE.format(base=base, packages=" ".join(PACKAGES))


def inputs_hash(dist: Distribution, checksum: str, dockerfile_text: str, base_id: str) -> str:
    blob = json.dumps({"pulsar": dist.version, "distribution": checksum, "dockerfile": dockerfile_text, "base": base_id},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _build(docker: DockerClient, dist: Distribution, text: str, tag: str, inputs: str) -> str:
    docker_dir().mkdir(parents=True, exist_ok=True)
    ctx = Path(tempfile.mkdtemp(prefix="context-", dir=docker_dir()))
    try:
        (ctx / "Dockerfile").write_text(text)
        # hard links: the 250 MB distribution costs nothing to stage (falls back to copying across file systems)
        shutil.copytree(dist.home, ctx / "pulsar", symlinks=True, copy_function=_link_or_copy,
                        ignore=lambda d, names: [n for n in names if Path(d) == dist.home and n in SKIPPED])
        try:
            img = docker.legacy_build(ctx, tags=[tag], network="host", quiet=True,
                                      labels={INPUTS_LABEL: inputs, VERSION_LABEL: dist.version})
        except DockerException as exc:
            tail = "\n".join(str(exc).strip().splitlines()[-25:])
            raise ImageBuildError(f"docker build of {tag} failed:\n{tail}") from None
        return img.id
    finally:
        shutil.rmtree(ctx, ignore_errors=True)


def ensure_image(version: str = DEFAULT_VERSION, distribution: str | Path | None = None, tag: str | None = None,
                 host: str | None = None, say: Say = _quiet) -> ImageResult:
    """The Pulsar image for this distribution, built only when its inputs changed."""
    t0 = time.monotonic()
    say("checking the Docker engine")
    docker = engine.client(host)
    say("resolving the Pulsar distribution")
    dist = dist_mod.resolve(distribution, version)
    tag = tag or default_tag(dist.version)
    with file_lock(docker_dir() / "image-build.lock"):
        t_base = time.monotonic()
        base_tag, base_id = ensure_base(docker, say)
        say(f"base image {base_tag} ready ({time.monotonic() - t_base:.1f}s)")
        say("hashing the inputs (distribution, Dockerfile, base image)")
        text = dockerfile(base_tag)
        inputs = inputs_hash(dist, distribution_checksum(dist.home), text, base_id)
        if docker.image.exists(tag):
            current = docker.image.inspect(tag)
            if (current.config.labels or {}).get(INPUTS_LABEL) == inputs:
                return ImageResult(tag, current.id, dist.version, inputs, False, time.monotonic() - t0)
        say(f"building {tag}: Debian's Java 17 + Pulsar {dist.version} from {dist.home}")
        t_build = time.monotonic()
        image_id = _build(docker, dist, text, tag, inputs)
        say(f"built {tag} ({time.monotonic() - t_build:.1f}s)")
    return ImageResult(tag, image_id, dist.version, inputs, True, time.monotonic() - t0)
