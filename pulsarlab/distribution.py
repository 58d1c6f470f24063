"""The Pulsar server distribution: resolved from Maven Central with ``mvn``, cached once per user.

The official ``org.apache.pulsar:pulsar-server-distribution:<version>:tar.gz:bin`` artifact is
downloaded into the user's Maven repository, unpacked into the pulsarlab cache, checked, and only
then marked usable. A tarball or an unpacked tree the user already has is accepted as well.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pulsarlab import settings
from pulsarlab.errors import DistributionError
from pulsarlab.progress import NO_PROGRESS, Reporter, human_bytes

# The newest 4.0 LTS patch release that Maven Central serves to this project's machines.
DEFAULT_VERSION = settings.current().pulsar_version
GROUP, ARTIFACT = "org.apache.pulsar", "pulsar-server-distribution"
MIN_JAVA = 17
VERIFIED_MARK = ".pulsarlab-verified"


def cache_root() -> Path:
    return settings.current().cache_dir


@dataclass(frozen=True)
class Java:
    home: Path | None
    executable: str
    major: int


@dataclass(frozen=True)
class Distribution:
    """An unpacked, verified Pulsar server distribution."""

    home: Path
    version: str
    java: Java

    @property
    def bin_pulsar(self) -> Path:
        return self.home / "bin" / "pulsar"

    @property
    def conf(self) -> Path:
        return self.home / "conf"

    @property
    def pulsar_perf(self) -> Path:
        return self.home / "bin" / "pulsar-perf"


def find_java() -> Java:
    """The JDK to run Pulsar with: ``JAVA_HOME`` or ``java`` on PATH, version 17 or newer."""
    home = settings.current().java_home
    exe = str(home / "bin" / "java") if home else shutil.which("java")
    if not exe or not Path(exe).exists():
        raise DistributionError(
            "no JDK found: Pulsar needs Java 17 or newer; install one (e.g. apt-get install openjdk-17-jdk-headless) "
            "or set JAVA_HOME"
        )
    try:
        out = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DistributionError(f"cannot run {exe} -version: {exc}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise DistributionError(f"cannot read the Java version from {exe} -version: {out.strip()[:200]}")
    major = int(m.group(2)) if m.group(1) == "1" else int(m.group(1))
    if major < MIN_JAVA:
        raise DistributionError(f"Java {major} at {exe} is too old: Pulsar 4.0 needs Java {MIN_JAVA} or newer")
    return Java(Path(home) if home else None, exe, major)


def verify_tree(home: Path, version: str | None = None) -> str:
    """Check that ``home`` is a usable server distribution; return its version."""
    missing = [p for p in ("bin/pulsar", "bin/pulsar-perf", "conf/broker.conf", "conf/bookkeeper.conf",
                           "conf/zookeeper.conf", "lib") if not (home / p).exists()]
    if missing:
        raise DistributionError(f"{home} is not a Pulsar server distribution: missing {', '.join(missing)}")
    versions = [m.group(1) for j in (home / "lib").glob("org.apache.pulsar-pulsar-broker-*.jar")
                if (m := re.fullmatch(r"org\.apache\.pulsar-pulsar-broker-(\d[\w.]*)\.jar", j.name))]
    if not versions:
        raise DistributionError(f"{home}/lib has no pulsar-broker jar: the distribution is incomplete")
    found = versions[0]
    if version and found != version:
        raise DistributionError(f"{home} holds Pulsar {found}, not {version}")
    for needed in ("org.apache.bookkeeper-bookkeeper-server-", "org.apache.zookeeper-zookeeper-"):
        if not list((home / "lib").glob(f"{needed}*.jar")):
            raise DistributionError(f"{home}/lib lacks {needed}*.jar: the distribution is incomplete")
    return found


@contextmanager
def file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def maven_repo() -> Path:
    return settings.current().maven_repo


def maven_artifact_dir() -> Path:
    """The local Maven repository's folder of the server distribution (one subfolder per version)."""
    return maven_repo() / GROUP.replace(".", "/") / ARTIFACT


def maven_tarball(version: str) -> Path:
    """Where Maven keeps the distribution's tarball once downloaded (the local artifact cache)."""
    return maven_artifact_dir() / version / f"{ARTIFACT}-{version}-bin.tar.gz"


def downloaded_bytes(tarball: Path) -> int:
    """Bytes of ``tarball`` on disk so far: Maven's resolver writes ``<name>.part`` beside it and
    renames it at the end, so the file growing in the local repository is the download itself."""
    total = 0
    for p in tarball.parent.glob(f"{tarball.name}*"):
        if p.name == tarball.name or p.name.endswith(".part"):
            with contextlib.suppress(OSError):  # renamed between the listing and the stat
                total += p.stat().st_size
    return total


@contextmanager
def watching_download(tarball: Path, progress: Reporter, interval: float = 0.5):
    """While the block runs, report the bytes of ``tarball`` downloaded so far (no total: Maven
    does not say it ahead, and nothing else is asked)."""
    key = "fetch"
    progress.begin(key, f"downloading {tarball.name} (mvn)", "0 B", unit="bytes")
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(interval):
            n = downloaded_bytes(tarball)
            progress.update(key, human_bytes(n), completed=n)

    thread = threading.Thread(target=watch, name="download-watch", daemon=True)
    thread.start()
    try:
        yield
    except BaseException:
        progress.end(key, "failed", ok=False)
        raise
    finally:
        stop.set()
        thread.join()
    progress.end(key, f"{human_bytes(downloaded_bytes(tarball))} downloaded")


def _maven_download(version: str, progress: Reporter = NO_PROGRESS) -> Path:
    mvn = shutil.which("mvn")
    if not mvn:
        raise DistributionError(
            f"Pulsar {version} is not cached and 'mvn' is not installed to fetch it from Maven Central "
            "(apt-get install maven), or pass --distribution PATH to a pulsar-server-distribution tarball"
        )
    coords = f"{GROUP}:{ARTIFACT}:{version}:tar.gz:bin"
    cmd = [mvn, "-B", "-q", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get",
           "-Dtransitive=false", f"-Dartifact={coords}"]
    tarball = maven_tarball(version)
    with watching_download(tarball, progress):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0 or not tarball.is_file():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-8:])
        raise DistributionError(f"mvn could not resolve {coords} from Maven Central:\n{tail}")
    return tarball


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _unpack(tarball: Path, dest: Path) -> Path:
    """Unpack into a temporary folder beside ``dest`` and move it in place once verified."""
    sha_file = tarball.with_name(tarball.name + ".sha1")
    if sha_file.is_file():
        want = sha_file.read_text().split()[0].strip()
        if want and _sha1(tarball) != want:
            raise DistributionError(f"{tarball} does not match its published SHA-1: delete it and retry")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        with tarfile.open(tarball) as tf:
            tf.extractall(tmp, filter="tar")
        tops = [p for p in tmp.iterdir() if p.is_dir()]
        if len(tops) != 1:
            raise DistributionError(f"{tarball} does not unpack to one apache-pulsar-* folder")
        verify_tree(tops[0])
        if dest.exists():
            shutil.rmtree(dest)
        tops[0].rename(dest)
        (dest / VERIFIED_MARK).write_text(tarball.name + "\n")
        return dest
    except (tarfile.TarError, OSError) as exc:
        raise DistributionError(f"cannot unpack {tarball}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve(
    distribution: str | Path | None = None, version: str = DEFAULT_VERSION, progress: Reporter = NO_PROGRESS
) -> Distribution:
    """A verified distribution: from ``distribution`` (tarball or folder) or from the cache/Maven
    (the download's bytes and the unpacking reported to ``progress``)."""
    java = find_java()
    root = cache_root()
    if distribution is not None:
        src = Path(distribution).expanduser().resolve()
        if src.is_dir():
            return Distribution(src, verify_tree(src), java)
        if not src.is_file():
            raise DistributionError(f"--distribution {src}: no such file or folder")
        dest = root / "pulsar" / f"from-{src.stem}-{_sha1(src)[:12]}"
        with file_lock(root / "pulsar.lock"):
            if not (dest / VERIFIED_MARK).is_file():
                with progress.step("unpack", f"unpacking {src.name}", "unpacking", "unpacked"):
                    _unpack(src, dest)
        return Distribution(dest, verify_tree(dest), java)
    dest = root / "pulsar" / f"apache-pulsar-{version}"
    with file_lock(root / "pulsar.lock"):
        if not (dest / VERIFIED_MARK).is_file():
            tarball = _maven_download(version, progress)
            with progress.step("unpack", f"unpacking {tarball.name}", "unpacking", "unpacked"):
                _unpack(tarball, dest)
    return Distribution(dest, verify_tree(dest, version), java)


if __name__ == "__main__":  # pragma: no cover - used by .ci/run to fetch ahead of the tests
    import sys

    for wanted in sys.argv[1:] or [DEFAULT_VERSION]:  # versions to fetch (default: pulsarlab's)
        d = resolve(version=wanted)
        print(f"Pulsar {d.version} ready at {d.home} (Java {d.java.major})")
