"""The state directory: what pulsarlab started, so later commands find it and stop it by pid."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from pulsarlab import settings
from pulsarlab.errors import StateError
from pulsarlab.identity import state_digest

STATE_FILE = "state.json"


@dataclass
class ProcessRecord:
    """A process pulsarlab started: its pid plus its start time, so a reused pid is never mistaken."""

    pid: int
    create_time: float

    def process(self) -> psutil.Process | None:
        try:
            p = psutil.Process(self.pid)
            if abs(p.create_time() - self.create_time) > 1.0 or p.status() == psutil.STATUS_ZOMBIE:
                return None
            return p
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def alive(self) -> bool:
        return self.process() is not None

    def paused(self) -> bool:
        p = self.process()
        try:
            return p is not None and p.status() == psutil.STATUS_STOPPED
        except psutil.NoSuchProcess:
            return False

    def signal(self, sig: int) -> None:
        p = self.process()
        if p is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait_gone(self, timeout: float) -> bool:
        """Wait until the process is gone. A zombie counts as gone: its parent (maybe another
        pulsarlab process) reaps it, not us, so ``psutil.wait`` would block until the timeout."""
        deadline = time.monotonic() + timeout
        while self.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def terminate(self, timeout: float, kill_after: bool = True) -> bool:
        """SIGTERM, then (with ``kill_after``) SIGKILL if it is still there after ``timeout``
        seconds; True once gone (without ``kill_after``: gone by the SIGTERM alone)."""
        p = self.process()
        if p is None:
            return True
        try:
            if p.status() == psutil.STATUS_STOPPED:
                p.send_signal(signal.SIGCONT)
            p.terminate()
        except psutil.NoSuchProcess:
            return True
        return self.wait_gone(timeout) or (kill_after and self.kill())

    def kill(self) -> bool:
        """SIGKILL; True once gone."""
        p = self.process()
        if p is None:
            return True
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
        return self.wait_gone(30)


@dataclass
class ClusterState:
    name: str
    runtime: str
    topology_ref: str
    distribution: str = ""
    version: str = ""  # the deployment's Pulsar release: what `up` started, or the last `upgrade --to`
    # the distribution (folder) each node was last started from, where it differs from ``distribution``
    # (a rolling upgrade moves the nodes one at a time): a node restarted later starts from it again
    node_distributions: dict[str, str] = field(default_factory=dict)
    upgrading_to: str = ""  # set while an upgrade runs or was stopped half-way; cleared once every node is on it
    initialized: list[str] = field(default_factory=list)
    nodes: dict[str, ProcessRecord] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    @staticmethod
    def path(state_dir: Path) -> Path:
        return state_dir / STATE_FILE

    @classmethod
    def load(cls, state_dir: Path) -> ClusterState | None:
        p = cls.path(state_dir)
        if not p.is_file():
            return None
        try:
            data = json.loads(p.read_text())
            data["nodes"] = {k: ProcessRecord(**v) for k, v in data.get("nodes", {}).items()}
            return cls(**data)
        except (ValueError, TypeError, AttributeError) as exc:  # not JSON, or not the fields pulsarlab writes
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StateError(f"{p} is not a state file pulsarlab can read ({why}); the nodes it recorded cannot be "
                             f"told: stop any that still run, then remove {p}") from None

    def save(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path(state_dir).with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(self.path(state_dir))
        remember(state_dir)


def read_record(path: Path) -> dict:
    """A JSON record pulsarlab keeps in a state folder (a runtime's settings), ``{}`` when absent;
    one that cannot be read is a :class:`StateError` naming it, not a traceback."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        data = exc
    if not isinstance(data, dict):
        raise StateError(f"{path} is not a record pulsarlab can read ({data}); restore it, or stop the "
                         "deployment's nodes and remove the folder")
    return data


def remember(state_dir: Path) -> None:
    """Note the state folder where ``pulsarlab ls`` looks (one small file per folder: writers never
    race); a folder whose state is gone is forgotten when ``ls`` next looks."""
    try:
        known = settings.current().known_clusters
        known.mkdir(parents=True, exist_ok=True)
        (known / f"{state_digest(state_dir)}.path").write_text(str(state_dir.resolve()))
    except OSError:
        pass  # a read-only home: the cluster works, only ls will not list it


def known_state_dirs() -> list[Path]:
    """Every state folder noted by :func:`remember` that still holds a state (the others are forgotten now)."""
    known = settings.current().known_clusters
    found = []
    for entry in sorted(known.glob("*.path")) if known.is_dir() else []:
        try:
            folder = Path(entry.read_text().strip())
        except OSError:
            continue
        if ClusterState.path(folder).is_file():
            found.append(folder)
        else:
            entry.unlink(missing_ok=True)
    return found
