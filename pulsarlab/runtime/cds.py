"""Class-data sharing for the local runtime's Pulsar nodes (the archives: :mod:`pulsarlab.classdata`).

Archives are kept per distribution and JDK, one per role (and ``init``, the metadata
initialisation); the first node of each role records.

The archive is bound to the exact classpath: every node puts one shared empty directory
(:func:`classpath_dir`) first on it (:func:`pulsarlab.runtime.jvm.log_conf_off_the_classpath`).
"""

from __future__ import annotations

from pathlib import Path

from pulsarlab.classdata import ClassArchives
from pulsarlab.distribution import Distribution
from pulsarlab.identity import state_digest


def class_archives(dist: Distribution) -> ClassArchives:
    return ClassArchives.for_java(dist.version, dist.home, dist.java.executable, dist.java.major)


def classpath_dir(archives: ClassArchives) -> Path:
    """The empty directory ``bin/pulsar`` puts first on every node's classpath."""
    d = archives.root / "classpath"
    d.mkdir(parents=True, exist_ok=True)
    return d


def node_recording(archives: ClassArchives, kind: str, node: str, state_dir: Path) -> Path:
    """Where a node of one deployment records its kind's archive."""
    return archives.recording(kind, f"{node}.{state_digest(state_dir)}")
