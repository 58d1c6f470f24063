"""Rehearsal hosts for the playbooks, made as users make them: ``pulsarlab hosts up`` (one
container per node, each in its own network namespace on the lab's network, reached over SSH
with the lab's key; some run systemd). Ansible reaches them through the inventory's SSH
connection, the path real hosts take; the tests look inside a host with ``docker exec``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.topology import Topology, load

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
FAILED = re.compile(r"^(fatal|failed): \[|^ERROR! |UNREACHABLE!", re.M)


def docker(host: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "DOCKER_HOST": host})


def pulsarlab(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pulsarlab.cli", *args], capture_output=True, text=True, timeout=timeout)


@dataclass
class Play:
    rc: int
    output: str
    seconds: float

    def recap(self) -> dict[str, dict[str, int]]:
        """Per host: ok, changed, unreachable, failed (from the PLAY RECAP)."""
        return {m[1]: dict(zip(("ok", "changed", "unreachable", "failed"), map(int, m.groups()[1:]), strict=True))
                for m in RECAP.finditer(self.output)}

    def failures(self, width: int = 2000) -> str:
        """Each failed task of the output with the PLAY and TASK it ran under, first to last: what a
        report cut short in its middle must still show."""
        out, play, task = [], "", ""
        for line in self.output.splitlines():
            if line.startswith("PLAY ["):
                play = line.rstrip(" *")
            elif line.startswith("TASK ["):
                task = line.rstrip(" *")
            elif FAILED.search(line):
                out.append(f"{play} / {task}:\n  {line[:width]}")
        return "\n".join(out) or "(no failed task in the output)"

    def report(self, tail: int = 6000) -> str:
        """The failed tasks, then the output's last ``tail`` characters."""
        return f"--- failed tasks (rc {self.rc}):\n{self.failures()}\n--- the output's tail:\n{self.output[-tail:]}"


class LabHosts:
    """The hosts ``pulsarlab hosts up`` made in ``folder`` for ``topology`` (those of ``systemd``
    run it, those of ``bare`` have no Java, those of ``sent`` get the distribution over SSH; the
    others download it from the lab's Maven mirror)."""

    def __init__(self, topology: Path, folder: Path, docker_host: str, systemd: frozenset[str] = frozenset(),
                 bare: frozenset[str] = frozenset(), sent: frozenset[str] = frozenset()) -> None:
        self.topology, self.folder, self.docker_host, self.systemd, self.bare = topology, folder, docker_host, systemd, bare
        self.sent = sent
        self.topo: Topology = load(str(topology))  # replaced by the lab's (its addresses) once up

    def start(self) -> None:
        made = pulsarlab("hosts", "up", "--topology", str(self.topology), "--out", str(self.folder), "--host", self.docker_host,
                         "--systemd", ",".join(sorted(self.systemd)) or "none", "--bare", ",".join(sorted(self.bare)),
                         "--sent", ",".join(sorted(self.sent)), "--json")
        assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
        self.lab = json.loads(made.stdout)
        self.topo = load(str(self.folder / "topology.yaml"), loopback=False)

    def name(self, node: str) -> str:
        return str(self.lab["hosts"][node]["container"])

    def replace(self, node: str) -> None:
        """The machine of ``node`` lost and a new one in its place (``pulsarlab hosts replace``)."""
        done = pulsarlab("hosts", "replace", str(self.folder), node)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def remove(self) -> None:
        pulsarlab("hosts", "down", str(self.folder), "--host", self.docker_host)

    def playbook(self, inventory: Path, book: str, *extra: str, timeout: float = 1200) -> Play:
        """``ansible-playbook`` against the hosts, over SSH as the inventory says."""
        env = {**os.environ, "ANSIBLE_CONFIG": str(PLAYBOOKS / "ansible.cfg"),
               "PYTHONPATH": os.pathsep.join([str(PLAYBOOKS.parent), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        cmd = ["ansible-playbook", "-i", str(inventory), str(PLAYBOOKS / book), *extra]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        play = Play(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0)
        if log := os.environ.get("PULSARLAB_TEST_PLAY_LOG"):  # every play's output, for profiling
            with open(log, "a") as f:
                f.write(f"\n##### {' '.join(cmd[3:])} rc={play.rc} {play.seconds:.1f}s\n{play.output}")
        return play
