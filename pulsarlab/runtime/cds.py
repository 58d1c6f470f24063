"""Class-data sharing for the Pulsar nodes of the local and docker runtimes (the archives:
:mod:`pulsarlab.classdata`).

Archives are kept per distribution and JDK (local) or per image (docker: the image holds both),
one per role (and ``init``, the metadata initialisation); the first node of each role records.

The archive is bound to the exact classpath: every node puts one shared empty directory
(:func:`classpath_dir`) first on it (:func:`pulsarlab.runtime.jvm.log_conf_off_the_classpath`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from pulsarlab import settings
from pulsarlab.classdata import ClassArchives
from pulsarlab.distribution import Distribution
from pulsarlab.identity import state_digest


def class_archives(dist: Distribution) -> ClassArchives:
    """The nodes' archives: AOT caches on JDK 25 and newer (their JVMs exit cleanly only through
    pulsarlab, which waits for the cache to be written), dynamic CDS archives before."""
    return ClassArchives.for_java(dist.version, dist.home, dist.java.executable, dist.java.major, aot=True)


def classpath_dir(archives: ClassArchives) -> Path:
    """The empty directory ``bin/pulsar`` puts first on every node's classpath."""
    d = archives.root / "classpath"
    d.mkdir(parents=True, exist_ok=True)
    return d


def node_recording(archives: ClassArchives, kind: str, node: str, state_dir: Path) -> Path:
    """Where a node of one deployment records its kind's archive."""
    return archives.recording(kind, f"{node}.{state_digest(state_dir)}")


IMAGE_PREFIX = "image-"


def _image_key(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]


def image_archives(image_id: str) -> ClassArchives:
    """The archives of the containers of one image (``sha256:...``): its JDK and distribution are
    fixed, so the image's id is the whole key; a rebuilt image gets a folder of its own."""
    return ClassArchives(settings.current().cache_dir / "cds" / f"{IMAGE_PREFIX}{_image_key(image_id)}")


def drop_gone_images(present: set[str]) -> None:
    """The archive folders of images the engine no longer has (``present``: the ids it has; a folder
    holds some 200 MB, and no container can map it again)."""
    root = settings.current().cache_dir / "cds"
    keep = {f"{IMAGE_PREFIX}{_image_key(i)}" for i in present}
    for folder in root.glob(f"{IMAGE_PREFIX}*"):
        if folder.name not in keep:
            shutil.rmtree(folder, ignore_errors=True)
