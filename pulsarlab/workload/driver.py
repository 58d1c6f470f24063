"""The JVM workload driver: compiled once per Pulsar version, one process per producer, consumer or reader.

The driver uses the Java client shipped in the server distribution (the one ``pulsar-perf`` uses),
so recording every event costs little next to the client itself. It is compiled with the JDK's
``javac`` against the distribution's ``lib/`` into the pulsarlab cache; the Python side starts the
processes, steers them by lines on stdin and reads their live counters from stdout (the protocol
is described in ``java/Driver.java``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulsarlab.classdata import JVM_LOG_ON_STDERR, ClassArchives
from pulsarlab.distribution import Distribution, cache_root, file_lock
from pulsarlab.errors import DistributionError
from pulsarlab.history.manifest import DriverOutcome
from pulsarlab.progress import NO_PROGRESS, Reporter

SOURCE = Path(__file__).with_name("java") / "Driver.java"
MAIN_CLASS = "pulsarlab.driver.Driver"
JVM_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:+UseParallelGC", "-Djava.net.preferIPv4Stack=true", *JVM_LOG_ON_STDERR)
# C1 only: a driver at a modest rate never repays what C2 spends compiling the client (seconds of
# CPU in each JVM's first minute, on machines where the cluster's nodes need that CPU)
QUICK_JIT = ("-XX:TieredStopAtLevel=1",)
QUICK_JIT_MAX_RATE = 5000.0  # messages/s of the whole workload; above it (or unlimited) C2 compiles
LOG4J2 = """\
status = error
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1} - %m%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
"""
COUNT_NAMES = ("invoked", "acked", "failed", "unknown", "received", "stored")


def javac_for(dist: Distribution) -> str:
    """The ``javac`` of the JDK that runs the cluster (a JRE alone cannot build the driver)."""
    candidates = []
    if dist.java.home:
        candidates.append(dist.java.home / "bin" / "javac")
    exe = shutil.which(dist.java.executable) or dist.java.executable
    candidates.append(Path(os.path.realpath(exe)).with_name("javac"))
    for c in candidates:
        if c.exists():
            return str(c)
    found = shutil.which("javac")
    if found:
        return found
    raise DistributionError(
        f"no javac next to {dist.java.executable}: the workload driver is compiled with the JDK's javac; "
        "install a full JDK (e.g. apt-get install openjdk-17-jdk-headless), not only a JRE"
    )


def driver_classes(dist: Distribution, progress: Reporter = NO_PROGRESS) -> Path:
    """Compile the driver against this distribution once; return its classes folder (with log4j2
    config), beside which :func:`driver_jar` holds the same classes (a class archive cannot be made
    with a folder of classes on the classpath)."""
    digest = hashlib.sha256(SOURCE.read_bytes() + dist.version.encode()).hexdigest()[:16]
    root = cache_root() / "driver" / digest
    done = root / ".built-jar"
    if done.exists():
        return root / "classes"
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        if done.exists():
            return root / "classes"
        classes = root / "classes"
        shutil.rmtree(classes, ignore_errors=True)
        cmd = [javac_for(dist), "-nowarn", "-d", str(classes), "-cp", f"{dist.home / 'lib'}/*", str(SOURCE)]
        with progress.step("compile", f"compiling the workload driver (once per Pulsar {dist.version})", "javac",
                           "compiled"):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if proc.returncode:
                tail = proc.stderr.strip()[-2000:]
                raise DistributionError(f"compiling the workload driver failed (exit {proc.returncode}): {tail}")
        with zipfile.ZipFile(driver_jar(classes), "w") as jar:
            for f in sorted(classes.rglob("*.class")):
                jar.write(f, f.relative_to(classes).as_posix())
        (classes / "log4j2-driver.properties").write_text(LOG4J2)
        done.touch()
    return classes


def driver_jar(classes: Path) -> Path:
    return classes.parent / "driver.jar"


def driver_archives(dist: Distribution, classes: Path) -> ClassArchives:
    """The class archives of this build of the driver (one per mode: produce, consume, read)."""
    return ClassArchives.for_java(f"driver-{classes.parent.name}", dist.home, dist.java.executable, dist.java.major)


_recorders: set[tuple[Path, str]] = set()  # (archives, mode) whose recording a driver of this process took
_recorders_lock = threading.Lock()


def _recording_for(archives: ClassArchives, mode: str, name: str) -> Path | None:
    """Where this driver records its mode's class archive: only while there is none, and only the
    first driver of that mode in this process (one archive suffices)."""
    if archives.archive(mode).is_file():
        return None
    with _recorders_lock:
        if (archives.root, mode) in _recorders:
            return None
        _recorders.add((archives.root, mode))
    return archives.recording(mode, f"{os.getpid()}-{name}")


@dataclass
class DriverProcess:
    """One driver JVM: a producer, a consumer or a storage reader, writing one history part."""

    name: str
    mode: str  # produce | consume | read
    out: Path
    part: str
    config: dict[str, Any]
    constants: dict[str, str | None]
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_NAMES, 0))
    errors: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)
    finished_at: float = 0.0  # monotonic time a producer's last outcome arrived
    failure: str | None = None  # why the driver failed (the first reason found), None while it has not
    switches: list[tuple[int, str]] = field(default_factory=list)  # (wall-clock ns, cluster) its client moved to
    _proc: subprocess.Popen | None = None
    _reader: threading.Thread | None = None
    _archives: ClassArchives | None = None
    _recording: Path | None = None

    @property
    def log_path(self) -> Path:
        return self.out / f"_driver-{self.name}.log"

    def start(self, dist: Distribution, classes: Path, quick_jit: bool = False) -> None:
        """Launch the JVM (``quick_jit``: C1 only, see :data:`QUICK_JIT`), mapping its mode's class
        archive (:mod:`pulsarlab.classdata`; the first driver of a mode records it)."""
        from pulsarlab.history.journal import write_meta  # numpy and Arrow: loaded when a driver starts

        base = self.out / self.part
        write_meta(base, self.constants)
        cfg_path = self.out / f"_driver-{self.name}.json"
        cfg_path.write_text(json.dumps({**self.config, "mode": self.mode, "name": self.name, "journal": str(base)}))
        log4j = f"-Dlog4j2.configurationFile={classes / 'log4j2-driver.properties'}"
        archives = self._archives = driver_archives(dist, classes)
        self._recording = _recording_for(archives, self.mode, self.name)
        sharing = archives.jvm_options(self.mode, self._recording).split()
        cmd = [dist.java.executable, *JVM_OPTIONS, *(QUICK_JIT if quick_jit else ()), *sharing, log4j,
               "-cp", f"{driver_jar(classes)}:{dist.home / 'lib'}/*", MAIN_CLASS, str(cfg_path)]
        with open(self.log_path, "ab") as log:
            # a process group of its own: a Ctrl-C on the terminal reaches pulsarlab, which decides
            # (end the send phase, or stop); end of stdin tells the driver its parent is gone
            self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1,
                                          process_group=0)
        self._reader = threading.Thread(target=self._read, name=f"driver-{self.name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            word, _, rest = line.rstrip("\n").partition(" ")
            if word == "@counts":
                values = rest.split()
                if len(values) == len(COUNT_NAMES):
                    self.counts = dict(zip(COUNT_NAMES, map(int, values), strict=True))
            elif word == "@ready":
                self.ready.set()
            elif word == "@finished":
                self.finished_at = time.monotonic()
            elif word == "@error":
                self.errors.append(rest)
            elif word == "@switch":
                self._switched(rest)

    def _switched(self, rest: str) -> None:
        """The client failed over (or back): from that moment its events happened on another cluster,
        which the part's meta records (the URL named by the failover settings' ``clusters``)."""
        ts, _, url = rest.partition(" ")
        clusters = self.config.get("failover", {}).get("clusters", {})
        cluster = clusters.get(url)
        if cluster is None or not ts.isdigit():
            self.errors.append(f"{self.name}: a switch to {url!r} that names no cluster of the topic: {rest}")
            return
        self.switches.append((int(ts), cluster))
        from pulsarlab.history.journal import write_meta

        write_meta(self.out / self.part, self.constants, self.switches)

    def tell(self, line: str) -> None:
        """Send a control line (``start <ms>``, ``drain``, ``stop``); a driver that is gone is ignored."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def exitcode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def wait(self, timeout: float) -> bool:
        """Wait for the process to exit (and its output to be read); False on timeout."""
        if self._proc is None:
            return True
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._settle()
        return True

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
        self._settle()

    def _settle(self) -> None:
        """Keep the class archive this JVM recorded if it exited cleanly (exit code 0)."""
        if self._archives is not None and self._recording is not None and self._proc is not None:
            self._archives.settle(self.mode, self._recording, self._proc.returncode == 0)
            self._recording = None

    def fail(self, reason: str) -> None:
        """Record that the driver failed; the first reason is the one kept."""
        self.failure = self.failure or reason

    def judge_exit(self) -> None:
        """Once the process is gone: a signal or a non-zero exit code is a failure. Warnings it
        printed (``@error``) while exiting 0 are not."""
        code = self.exitcode
        if code is not None and code < 0:
            try:
                self.fail(f"died by signal {signal.Signals(-code).name}")
            except ValueError:
                self.fail(f"died by signal {-code}")
        elif code:
            self.fail(f"exit code {code}" + (f": {self.errors[-1]}" if self.errors else ""))

    def outcome(self) -> DriverOutcome:
        code = self.exitcode
        # the last @counts line is the final tally only once the process exited 0 and its output was read
        final = dict(self.counts) if code == 0 and self.failure is None and not self._reading() else None
        return DriverOutcome(self.name, self.mode, self.part, code, self.failure is not None, self.failure, final)

    def _reading(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
