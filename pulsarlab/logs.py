"""Node logs through the deployment contract (``log_file``, ``log_tail``), whatever the runtime."""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.errors import StateError

# the log4j pattern our templates set: %d{ISO8601_OFFSET_DATE_TIME_HHMM}, e.g. 2026-11-23T14:25:01,123+0000
STAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2},\d{3}[+-]\d{4})")
POLL = 0.25
DEFAULT_LINES = 50
READ_BACK = 100_000  # lines searched for a --since window


@dataclass(frozen=True)
class NodeLog:
    node: str
    path: Path | None
    lines: list[str]

    @property
    def absent(self) -> bool:
        """The node has a log file, and it does not exist yet (it has not started here)."""
        return self.path is not None and not self.path.is_file()


def check_node(cluster: Endpoints, name: str) -> None:
    names = [n.name for n in cluster.topo.nodes]
    if name not in names:
        raise StateError(f"no node {name!r} in cluster {cluster.topo.name!r} (nodes: {', '.join(names)})")


def tail(cluster: NodeControl, name: str, lines: int | None = None, seconds: float | None = None) -> NodeLog:
    """One node's log: what the last ``seconds`` wrote (if given), at most its last ``lines`` lines
    (default: 50 without ``seconds``, all of them with it)."""
    check_node(cluster, name)
    path = cluster.log_file(name)
    want = lines if lines is not None else (None if seconds is not None else DEFAULT_LINES)
    if path is None:  # a runtime without a log file on this machine: its own tail is what there is
        text = cluster.log_tail(name, READ_BACK if want is None else want)
        got = text.splitlines() if text else []
    elif path.is_file():
        with open(path, encoding="utf-8", errors="replace") as fh:
            got = [ln.rstrip("\n") for ln in (deque(fh, maxlen=want) if seconds is None else fh)]
    else:
        got = []
    if seconds is not None:
        got = since(got, time.time() - seconds)
    if want is not None:
        got = got[-want:] if want else []
    return NodeLog(name, path, got)


def stamp_of(line: str) -> float | None:
    m = STAMP.match(line)
    if not m:
        return None
    try:
        return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S,%f%z").timestamp()
    except ValueError:
        return None


def since(lines: list[str], cutoff: float) -> list[str]:
    """The lines written at or after ``cutoff`` (epoch seconds). A line without a time stamp (a
    stack frame, a JVM message) belongs with the stamped line before it; lines before the first
    stamp are of unknown age and left out."""
    out: list[str] = []
    keep = False
    for line in lines:
        t = stamp_of(line)
        if t is not None:
            keep = t >= cutoff
        if keep:
            out.append(line)
    return out


def all_logs(cluster: NodeControl, lines: int | None = None, seconds: float | None = None) -> list[NodeLog]:
    """Every node's log, as :func:`tail` cuts it."""
    return [tail(cluster, n.name, lines, seconds) for n in cluster.topo.nodes]


def follow(cluster: NodeControl, name: str, stop: Callable[[], bool] = lambda: False) -> Iterator[str]:
    """Lines appended to a node's log from now on, until ``stop()`` says so (or Ctrl-C)."""
    check_node(cluster, name)
    path = cluster.log_file(name)
    if path is None:
        raise StateError(f"node {name} of the {cluster.runtime} runtime has no log file to follow")
    pos = path.stat().st_size if path.is_file() else 0
    partial = b""
    while not stop():
        if path.is_file():
            size = path.stat().st_size
            if size < pos:  # truncated or replaced: start over
                pos = 0
            if size > pos:
                with open(path, "rb") as fh:
                    fh.seek(pos)
                    chunk = fh.read(size - pos)
                pos = size
                *done, partial = (partial + chunk).split(b"\n")
                for raw in done:
                    yield raw.decode(errors="replace")
                continue
        time.sleep(POLL)
