"""Class-data sharing: the classes a kind of JVM loads, archived once per program and JDK.

A JVM started while its kind has no archive yet records the classes it loads and writes them
(JDK 17's dynamic AppCDS, ``-XX:ArchiveClassesAtExit``) when it exits cleanly; every later start
of that kind maps the archive instead of parsing and verifying its ten thousand classes again.
Where the caller allows it and the JDK is 25 or newer, the archive is an AOT cache instead
(``-XX:AOTCacheOutput``, JEP 514): its classes are kept loaded and linked as well, so a start does
less again (the Pulsar nodes: about a tenth less CPU, docs/fast-start.md).
One JVM of each kind records at a time in practice (the caller picks it); one killed before it
exits leaves nothing behind. An archive the JVM finds unusable (another classpath, another JDK
build) is ignored by the JVM itself (``-Xshare:auto``), so the worst case is the ordinary start.

Two programs use it: the Pulsar nodes of the local and docker runtimes (:mod:`pulsarlab.runtime.cds`) and the
verifier's Spark driver (:mod:`pulsarlab.verify.session`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path, PurePath

from pulsarlab import settings

STALE_SECONDS = 24 * 3600  # a recording left by a JVM that never exited cleanly
# The JVM's own log (an archive's dump warns once per class it skips) on stderr: its default is
# stdout, which belongs to the program (verify --json, the workload driver's protocol)
JVM_LOG_ON_STDERR = ("-Xlog:disable", "-Xlog:all=warning:stderr")


AOT_MIN_JAVA = 25  # the first JDK whose one run both records and writes an AOT cache (JEP 514)


def map_options(archive: PurePath, aot: bool = False) -> str:
    """The JVM options that map an archive (ignored by the JVM if it cannot use it: ``-Xshare:auto``,
    and for an AOT cache the default ``-XX:AOTMode=auto``)."""
    return f"-XX:AOTCache={archive}" if aot else f"-XX:SharedArchiveFile={archive} -Xshare:auto"


RECORD_FLAG = "-XX:ArchiveClassesAtExit"
AOT_RECORD_FLAG = "-XX:AOTCacheOutput"  # at its exit the JVM starts a second one that writes the cache, and waits
RECORD_FLAGS = (RECORD_FLAG, AOT_RECORD_FLAG)


def record_options(recording: PurePath, aot: bool = False) -> str:
    """The JVM options that record the classes it loads, written to ``recording`` at its exit."""
    return f"{AOT_RECORD_FLAG if aot else RECORD_FLAG}={recording}"


LOCATION_FILE = "location"  # in an archive folder: the install folder its archives were made from


@dataclass(frozen=True)
class ClassArchives:
    """Where one program + JDK pair keeps its archives, one per kind of JVM."""

    root: Path
    location: Path | None = None  # the install folder (for_java), recorded when a JVM records
    aot: bool = False  # AOT caches (JDK 25+) rather than dynamic CDS archives

    @classmethod
    def for_java(cls, program: str, location: Path, java_executable: str | Path, major: int | None = None,
                 aot: bool = False) -> ClassArchives:
        """The archives of ``program`` (a name and version) installed at ``location`` (the folder
        its jars are in) run by this Java executable. An archive holds the classpath it was made
        with, and a JVM silently ignores one made from another: so another install of the same
        version, and another JDK build (its size or time changed), get folders of their own.
        ``aot``: AOT caches where the JDK (``major``) writes them in one run."""
        java = Path(java_executable).resolve()
        st = java.stat()
        key = hashlib.sha256(f"{java}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
        where = hashlib.sha256(str(Path(location).resolve()).encode()).hexdigest()[:8]
        return cls(settings.current().cache_dir / "cds" / f"{program}-{where}-java{major or ''}-{key}", Path(location).resolve(),
                   aot=aot and (major or 0) >= AOT_MIN_JAVA)

    @property
    def suffix(self) -> str:
        return "aot" if self.aot else "jsa"

    def archive(self, kind: str) -> Path:
        """The archive of one kind of JVM (a Pulsar role, ``init``, the Spark ``driver``)."""
        return self.root / f"{kind}.{self.suffix}"

    def recording(self, kind: str, owner: str) -> Path:
        """Where one JVM (``owner``: unique among those that may record at once) records its
        kind's archive before it is promoted."""
        self.root.mkdir(parents=True, exist_ok=True)  # the JVM writes there but makes no folder
        if self.location is not None:
            (self.root / LOCATION_FILE).write_text(str(self.location))
            self._drop_gone_installs()
        return self.root / f"{kind}.{owner}.{self.suffix}.part"

    def jvm_options(self, kind: str, recording: Path | None) -> str:
        """Map the kind's archive if there is one; else record one at ``recording`` (if given)."""
        archive = self.archive(kind)
        if archive.is_file():
            return map_options(archive, self.aot)
        if recording is None:
            return ""
        self._drop_stale()
        recording.unlink(missing_ok=True)
        return record_options(recording, self.aot)

    def settle(self, kind: str, recording: Path, clean_exit: bool) -> Path | None:
        """After the JVM is gone: promote its recording if it exited cleanly, else drop it.
        Returns the archive promoted now, if any."""
        # an AOT recording's configuration, left behind when the JVM was killed before writing the cache
        recording.with_name(recording.name + ".config").unlink(missing_ok=True)
        if not recording.is_file():
            return None
        if not clean_exit or recording.stat().st_size == 0:
            recording.unlink(missing_ok=True)
            return None
        archive = self.archive(kind)
        os.replace(recording, archive)  # atomic: a concurrent start sees the whole file or none
        return archive

    def _drop_gone_installs(self) -> None:
        """Archive folders whose install folder is gone (a throw-away venv's PySpark, a removed
        distribution): no JVM can map them again, and each holds some 100-200 MB."""
        for folder in self.root.parent.iterdir():
            marker = folder / LOCATION_FILE
            try:
                gone = folder != self.root and marker.is_file() and not Path(marker.read_text().strip()).exists()
            except OSError:
                continue
            if gone:
                shutil.rmtree(folder, ignore_errors=True)

    def _drop_stale(self) -> None:
        now = time.time()
        for p in self.root.glob("*.part*"):  # an AOT recording's configuration too (*.part.config)
            try:
                if now - p.stat().st_mtime > STALE_SECONDS:
                    p.unlink()
            except FileNotFoundError:
                pass
