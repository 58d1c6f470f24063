"""Packet filtering between node addresses with iptables, and its exact undoing.

Every rule pulsarlab adds is a DROP in the ``filter`` table's ``OUTPUT`` chain, matching one
source address and one destination address, and carries an iptables comment that starts with the
deployment's identity (``pulsarlab:<hash of its state directory>``). Nodes of both runtimes use
addresses of this machine (loopback; docker runs with host networking), and every packet between
two of them passes ``OUTPUT`` once, so one rule per direction cuts a pair. Removing rules lists the
chain and deletes exactly those whose comment carries the identity: other rules, and other
deployments' rules, stay.

The rule set is computed by pure functions (:func:`cut`, :func:`parse_listing`); only
:class:`Iptables` runs the command.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.errors import StateError

CHAIN = "OUTPUT"
PREFIX = "pulsarlab:"
_LABEL = re.compile(r"^[A-Za-z0-9_.:|>-]+( [A-Za-z0-9_.:|>-]+)*$")


def identity(state_dir: Path) -> str:
    """The comment prefix of one deployment's rules: stable across processes (it is derived from
    the state directory's absolute path), so a later ``heal`` finds what a crashed run added."""
    digest = hashlib.sha256(str(Path(state_dir).resolve()).encode()).hexdigest()[:12]
    return f"{PREFIX}{digest}"


@dataclass(frozen=True, order=True)
class Rule:
    """Drop packets from ``source`` to ``dest``; ``comment`` = identity + what the rule is for."""

    source: str
    dest: str
    comment: str

    def spec(self) -> list[str]:
        """The rule's iptables arguments after the chain name."""
        return ["-s", f"{self.source}/32", "-d", f"{self.dest}/32", "-m", "comment", "--comment", self.comment,
                "-j", "DROP"]


def comment(ident: str, label: str) -> str:
    """``<identity> <label>``; the label names the fault (``partition eu us``)."""
    if not _LABEL.match(label) or len(ident) + 1 + len(label) > 255:
        raise ValueError(f"unusable rule label {label!r}")
    return f"{ident} {label}"


def cut(ident: str, label: str, side_a: list[str], side_b: list[str]) -> list[Rule]:
    """Rules dropping every packet between an address of ``side_a`` and one of ``side_b``, both
    ways (an address on both sides is not cut from itself)."""
    note = comment(ident, label)
    rules = {Rule(a, b, note) for a in side_a for b in side_b if a != b}
    rules |= {Rule(b, a, note) for a in side_a for b in side_b if a != b}
    return sorted(rules)


def parse_listing(text: str, ident: str | None = None) -> list[Rule]:
    """The DROP rules with a pulsarlab comment in ``iptables -S OUTPUT`` output (only those of
    ``ident`` if given); other rules are ignored."""
    out = []
    for line in text.splitlines():
        if not line.startswith(f"-A {CHAIN} ") or PREFIX not in line:
            continue
        words = shlex.split(line)
        opts = dict(zip(words[2::2], words[3::2], strict=False)) if _pairs(words[2:]) else {}
        note = opts.get("--comment", "")
        if opts.get("-j") != "DROP" or not note.startswith(PREFIX):
            continue
        if ident is not None and note.split(" ", 1)[0] != ident:
            continue
        src, dst = opts.get("-s", ""), opts.get("-d", "")
        if not (src.endswith("/32") and dst.endswith("/32")):
            continue
        out.append(Rule(src.removesuffix("/32"), dst.removesuffix("/32"), note))
    return out


def _pairs(words: list[str]) -> bool:
    """Options of a listed rule come in ``-x value`` pairs (``-m comment`` included)."""
    return len(words) % 2 == 0 and all(w.startswith("-") for w in words[::2])


class Iptables:
    """Runs ``iptables`` (as root); every failure is one clear :class:`StateError`."""

    def __init__(self, binary: str = "iptables"):
        self.binary = binary

    def usable(self) -> str | None:
        """None if rules can be changed here, else why not."""
        if shutil.which(self.binary) is None:
            return f"'{self.binary}' is not installed (network faults filter packets with iptables)"
        if os.geteuid() != 0:
            return "network faults need root: iptables rules can only be changed by root (run as root or with sudo)"
        return None

    def require(self) -> None:
        why = self.usable()
        if why:
            raise StateError(why)

    def run(self, *args: str) -> str:
        try:
            proc = subprocess.run([self.binary, "-w", "10", *args], capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise StateError(f"iptables {' '.join(args)} did not finish in 30s") from None
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise StateError(f"iptables {' '.join(args)} failed: {msg[-1] if msg else f'exit code {proc.returncode}'}")
        return proc.stdout

    def listing(self, ident: str | None = None) -> list[Rule]:
        return parse_listing(self.run("-S", CHAIN), ident)

    def add(self, rules: list[Rule]) -> int:
        """Insert the rules not already there (at the chain's top, ahead of any ACCEPT); return how many."""
        self.require()
        have = set(self.listing())
        todo = [r for r in rules if r not in have]
        for r in todo:
            self.run("-I", CHAIN, "1", *r.spec())
        return len(todo)

    def remove(self, ident: str, label: str | None = None) -> int:
        """Delete this deployment's rules (only those of ``label`` if given); return how many."""
        self.require()
        gone = 0
        for r in self.listing(ident):
            if label is None or r.comment == comment(ident, label):
                self.run("-D", CHAIN, *r.spec())
                gone += 1
        return gone


def remove_if_any(state_dir: Path) -> int:
    """For ``down``: remove a deployment's rules where iptables can be used; where it cannot, none
    can have been added, so there is nothing to do."""
    ipt = Iptables()
    if ipt.usable() is not None:
        return 0
    return ipt.remove(identity(state_dir))
