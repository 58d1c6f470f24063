"""Class-data sharing: the classes each role loads, archived once per distribution and JDK.

A node started while its role has no archive yet records the classes it loads and writes them
(JDK 17's dynamic AppCDS, ``-XX:ArchiveClassesAtExit``) when it stops cleanly; every later start
of that role maps the archive instead of parsing and verifying some ten thousand classes again.
Only one JVM of each kind records (the runtime picks the first node of each role); one killed
before it stops leaves nothing behind. An archive the JVM finds unusable (another classpath,
another JDK build) is ignored by the JVM itself (``-Xshare:auto``), so the worst case is the
ordinary start.

The archive is bound to the exact classpath; ``bin/pulsar`` puts the directory of
``PULSAR_LOG_CONF`` first on it, so every node points that at one shared empty directory and
names its own log configuration with ``-Dlog4j.configurationFile`` instead.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.distribution import Distribution, cache_root
from pulsarlab.identity import state_digest

STALE_SECONDS = 24 * 3600  # a recording left by a node that never stopped cleanly


@dataclass(frozen=True)
class ClassArchives:
    """Where one distribution + JDK pair keeps its per-role archives."""

    root: Path

    @classmethod
    def of(cls, dist: Distribution) -> ClassArchives:
        java = Path(dist.java.executable).resolve()
        st = java.stat()
        key = hashlib.sha256(f"{java}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
        return cls(cache_root() / "cds" / f"{dist.version}-java{dist.java.major}-{key}")

    @property
    def classpath_dir(self) -> Path:
        """The empty directory ``bin/pulsar`` puts first on every node's classpath."""
        d = self.root / "classpath"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def archive(self, kind: str) -> Path:
        """The archive of one kind of JVM: a role, or ``init`` (the metadata initialisation)."""
        return self.root / f"{kind}.jsa"

    def recording(self, kind: str, name: str, state_dir: Path) -> Path:
        """Where one JVM records its archive before it is promoted."""
        self.root.mkdir(parents=True, exist_ok=True)  # the JVM writes there but makes no folder
        return self.root / f"{kind}.{name}.{state_digest(state_dir)}.jsa.part"

    def jvm_options(self, kind: str, recording: Path | None) -> str:
        """Map the kind's archive if there is one; else record one at ``recording`` (if given)."""
        archive = self.archive(kind)
        if archive.is_file():
            return f"-XX:SharedArchiveFile={archive} -Xshare:auto"
        if recording is None:
            return ""
        self._drop_stale()
        recording.unlink(missing_ok=True)
        return f"-XX:ArchiveClassesAtExit={recording}"

    def settle(self, kind: str, recording: Path, clean_exit: bool) -> Path | None:
        """After the JVM is gone: promote its recording if it exited cleanly, else drop it.
        Returns the archive promoted now, if any."""
        if not recording.is_file():
            return None
        if not clean_exit or recording.stat().st_size == 0:
            recording.unlink(missing_ok=True)
            return None
        archive = self.archive(kind)
        os.replace(recording, archive)  # atomic: a concurrent start sees the whole file or none
        return archive

    def _drop_stale(self) -> None:
        now = time.time()
        for p in self.root.glob("*.jsa.part"):
            try:
                if now - p.stat().st_mtime > STALE_SECONDS:
                    p.unlink()
            except FileNotFoundError:
                pass
