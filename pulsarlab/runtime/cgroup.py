"""Each node in a cgroup (v2) of its own, so that packet filters can tell its traffic apart.

On loopback every node's outgoing connections leave from 127.0.0.1 whatever address the node
listens on, so a rule on source addresses never sees a node's requests to another node. A rule
that matches the sending socket's cgroup (``iptables -m cgroup --path``) does: a socket belongs to
the cgroup of the process that created it. The local runtime therefore starts every node inside
``pulsarlab/<digest of the state directory>/<node>`` of the cgroup v2 hierarchy (root only: only
root creates cgroups, and only root changes packet filters anyway). Docker puts each container in
a cgroup of its own already; :func:`of_pid` reads it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from pulsarlab.deployment import state_digest

PARENT = "pulsarlab"
MOUNTS = Path("/proc/self/mounts")


def hierarchy() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` or, on a hybrid host,
    ``/sys/fs/cgroup/unified``); None without one."""
    try:
        lines = MOUNTS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def usable() -> Path | None:
    """The hierarchy if this process may create cgroups in it (root), else None."""
    root = hierarchy()
    return root if root is not None and os.geteuid() == 0 and os.access(root, os.W_OK) else None


def node_path(state_dir: Path, node: str) -> str:
    """A node's cgroup, relative to the hierarchy's root (as ``iptables -m cgroup --path`` takes it)."""
    return f"{PARENT}/{state_digest(state_dir)}/{node}"


def entering(state_dir: Path, node: str) -> Callable[[], None] | None:
    """For ``subprocess.Popen(preexec_fn=...)``: the child moves itself into the node's cgroup
    before it execs, so every socket the node ever opens is in it. None where cgroups cannot be
    made here (the node then runs where its parent does, and network faults say so)."""
    root = usable()
    if root is None:
        return None
    procs = root / node_path(state_dir, node) / "cgroup.procs"
    try:
        procs.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    target = str(procs)

    def move_self() -> None:
        # runs in the forked child: only a write; a failure leaves the node where it is
        with contextlib.suppress(OSError):
            fd = os.open(target, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    return move_self


def of_pid(pid: int) -> str | None:
    """The cgroup v2 path of a process, relative to the hierarchy's root ("" for the root itself);
    None when it cannot be read."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip().lstrip("/")
    return None


def remove(state_dir: Path) -> None:
    """Remove the deployment's cgroups once its processes are gone (a busy one stays)."""
    root = hierarchy()
    if root is None:
        return
    base = root / PARENT / state_digest(state_dir)
    if not base.is_dir():
        return
    for d in base.iterdir():
        with contextlib.suppress(OSError):
            d.rmdir()
    with contextlib.suppress(OSError):
        base.rmdir()
