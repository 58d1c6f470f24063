"""Packet filtering between nodes with iptables, and its exact undoing.

Every rule pulsarlab adds is a DROP in the ``filter`` table's ``OUTPUT`` chain that matches the
sending socket's cgroup (``-m cgroup --path``: one node's, as its deployment's ``traffic_cgroup`` names it)
and one destination address (another node's), and carries an iptables comment that starts with
the deployment's identity (``pulsarlab:<hash of its state directory>``). Matching on the sender's
cgroup rather than its address is what makes the cut real: on loopback every node's outgoing
connections leave from 127.0.0.1, whatever address it listens on. Each connection between two
nodes is opened by one of them towards the other's address, so the pair of rules (A to B's
address, B to A's address) stops every connection between them: the opener's requests and
acknowledgements are dropped and the connection stalls, as across a cut link. Removing rules
lists the chain and deletes exactly those whose comment carries the identity: other rules, and
other deployments' rules, stay.

The rule set is computed by pure functions (:func:`cut`, :func:`parse_listing`); only
:class:`Iptables` runs the command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.errors import StateError
from pulsarlab.identity import state_digest

CHAIN = "OUTPUT"
PREFIX = "pulsarlab:"
_LABEL = re.compile(r"^[A-Za-z0-9_.:|>-]+( [A-Za-z0-9_.:|>-]+)*$")


def identity(state_dir: Path) -> str:
    """The comment prefix of one deployment's rules: stable across processes (it is derived from
    the state directory's absolute path), so a later ``heal`` finds what a crashed run added."""
    return f"{PREFIX}{state_digest(state_dir)}"


@dataclass(frozen=True, order=True)
class Rule:
    """Drop packets that sockets of cgroup ``cgroup`` send to ``dest``; ``comment`` = identity +
    what the rule is for."""

    cgroup: str
    dest: str
    comment: str

    def spec(self) -> list[str]:
        """The rule's iptables arguments after the chain name, in the order ``iptables -S`` lists them."""
        return ["-d", f"{self.dest}/32", "-m", "cgroup", "--path", self.cgroup, "-m", "comment", "--comment",
                self.comment, "-j", "DROP"]


@dataclass(frozen=True, order=True)
class Member:
    """One node on one side of a cut: the cgroup its sockets are in, and the address it listens on."""

    cgroup: str
    address: str


def comment(ident: str, label: str) -> str:
    """``<identity> <label>``; the label names the fault (``partition eu us``)."""
    if not _LABEL.match(label) or len(ident) + 1 + len(label) > 255:
        raise ValueError(f"unusable rule label {label!r}")
    return f"{ident} {label}"


def cut(ident: str, label: str, side_a: list[Member], side_b: list[Member]) -> list[Rule]:
    """Rules cutting every node of ``side_a`` from every node of ``side_b``, both ways (a node on
    both sides is not cut from itself)."""
    note = comment(ident, label)
    rules = {Rule(a.cgroup, b.address, note) for a in side_a for b in side_b if a != b}
    rules |= {Rule(b.cgroup, a.address, note) for a in side_a for b in side_b if a != b}
    return sorted(rules)


# ----- on hosts of their own (each with its own filter, see deployment.HostFilters) -----------------
CONTROLLER = "@controller"  # in a host's rule: the address this machine reaches that host from


def _host_rule(chain: str, match: str, note: str) -> str:
    return f'{chain} {match} -m comment --comment "{note}" -j DROP'


def host_rule_comment(rule: str) -> str:
    """The comment of a host rule :func:`host_cut` or :func:`host_mute` made."""
    return rule.split('--comment "', 1)[1].split('"', 1)[0]


def host_cut(ident: str, label: str, side_a: dict[str, str], side_b: dict[str, str]) -> dict[str, list[str]]:
    """Per node's host, the rules that cut it from every node of the other side (``{name: address}``
    each): packets from and to those addresses dropped in its own filter, so each host of a pair
    drops the other's (a node on both sides is not cut from itself)."""
    note = comment(ident, label)
    rules: dict[str, set[str]] = {}
    for a, a_addr in side_a.items():
        for b, b_addr in side_b.items():
            if a == b:
                continue
            for host, other in ((a, b_addr), (b, a_addr)):
                rules.setdefault(host, set()).update({_host_rule("INPUT", f"-s {other}/32", note),
                                                      _host_rule("OUTPUT", f"-d {other}/32", note)})
    return {host: sorted(r) for host, r in sorted(rules.items())}


def host_mute(ident: str, label: str, node: str, ports: list[int]) -> dict[str, list[str]]:
    """The rule that drops what the node's JVM sends from its own ports to this machine (its
    replies to clients: the workload and pulsarlab connect from here), on its host."""
    match = f"-d {CONTROLLER}/32 -p tcp -m multiport --sports {','.join(map(str, sorted(ports)))}"
    return {node: [_host_rule("OUTPUT", match, comment(ident, label))]}


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
        group, dst = opts.get("--path", ""), opts.get("-d", "")
        if not group or not dst.endswith("/32"):
            continue
        out.append(Rule(group, dst.removesuffix("/32"), note))
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

    def dropped(self, ident: str) -> int:
        """How many packets this deployment's rules have dropped so far (iptables' counters): the
        evidence that a cut cut real traffic."""
        total = 0
        for line in self.run("-L", CHAIN, "-v", "-n", "-x").splitlines():
            words = line.split()
            if "/*" in words and words[0].isdigit() and words[words.index("/*") + 1] == ident:
                total += int(words[0])
        return total

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
