"""Every shell command the documentation shows (README.md, docs/ and docs/runbooks/, fenced
``bash``/``sh``/``shell``/``console`` blocks), whatever its program: which of them the docs tier
runs against a smoke cluster (``tests/docs``), why each other one is not run, and what a
non-pulsarlab line names that must exist (a playbook, a Compose file, a script, a module, a pip
extra). ``tests/unit/test_docs_commands.py`` parses the ``pulsarlab`` ones against the CLI."""

from __future__ import annotations

import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "runbooks").glob("*.md")))
SHELL_FENCE = re.compile(r"^```(bash|sh|shell|console)\s*$")


@dataclass(frozen=True)
class DocCommand:
    """One command of a documented shell line (``a && b`` gives two)."""

    file: str  # relative to the repository
    line: int
    text: str  # the command as written (a NAME=value before it included), without its comment
    argv: tuple[str, ...]  # the program and its arguments
    env: tuple[str, ...] = ()  # NAME=value words before the program

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def documented_commands(files: tuple[Path, ...] = DOCS) -> list[DocCommand]:
    found: list[DocCommand] = []
    for path in files:
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        inside = False
        pending, start = "", 0
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                inside = bool(SHELL_FENCE.match(line)) if not inside else False
                continue
            if not inside or not line.strip():
                continue
            if not pending:
                start = number
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            full, pending = pending + line, ""
            words = shlex.split(full, comments=True)
            for env, part in _split_and(words):
                found.append(DocCommand(name, start, shlex.join([*env, *part]), tuple(part), tuple(env)))
    return found


def _split_and(words: list[str]) -> list[tuple[list[str], list[str]]]:
    """Commands of one line, split at ``&&``, ``||``, ``;``, ``&``: (the ``NAME=value`` words
    before the program, the program and its arguments)."""
    parts: list[tuple[list[str], list[str]]] = [([], [])]
    for w in words:
        env, argv = parts[-1]
        if w in ("&&", "||", ";", "&"):
            parts.append(([], []))
        elif not argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w):
            env.append(w)
        else:
            argv.append(w)
    return [(env, argv) for env, argv in parts if argv]


def other_problem(argv: tuple[str, ...]) -> str | None:
    """What a documented non-pulsarlab line names that is not there: a playbook, a Compose file, a
    script of the repository, a ``python -m`` module, a pip extra."""
    program = argv[0]
    if program in ("ansible-playbook",):
        books = [w for w in argv[1:] if w.endswith(".yml") and not w.endswith("inventory.yml")]
        missing = [b for b in books if not (ROOT / b).is_file() and not (ROOT / "playbooks" / b).is_file()]
        return f"no playbook {', '.join(missing)}" if missing else None
    if program == "docker" and argv[1:2] == ("compose",):
        files = [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "-f"]
        missing = [f for f in files if not (ROOT / f).is_file()]
        return f"no Compose file {', '.join(missing)}" if missing else None
    if program.startswith("scripts/"):
        return None if (ROOT / program).is_file() else f"no script {program}"
    if program in ("python", "python3") and argv[1:2] == ("-m",):
        module = argv[2]
        return None if importlib.util.find_spec(module) is not None else f"no module {module}"
    if program == "pip" and "-e" in argv:
        target = argv[argv.index("-e") + 1]
        extras = re.findall(r"\[([^\]]*)\]", target)
        text = (ROOT / "pyproject.toml").read_text()
        missing = [e for group in extras for e in group.split(",") if not re.search(rf"^{re.escape(e)}\s*=", text, re.M)]
        return f"no pip extra {', '.join(missing)}" if missing else None
    return None


# The documented commands the docs tier runs as written (placeholders filled in: DIR, and the
# files my-topology.yaml and hosts.yaml made beside them) from another folder, with the smoke
# cluster found through PULSARLAB_STATE_DIR as `pulsarlab env` exports it.
RUN_ON_SMOKE = frozenset({
    "pulsarlab topologies",
    "pulsarlab status",
    "pulsarlab status --json",
    "pulsarlab ls",
    "pulsarlab configure --dry-run",
    "pulsarlab inspect placement --json",
    "pulsarlab inspect bookies",
    "pulsarlab env",
    "pulsarlab scenario list",
    "pulsarlab render --topology geo --out DIR",
    "pulsarlab render --topology geo --secure --out DIR",
    "pulsarlab validate my-topology.yaml",
    "pulsarlab render --topology my-topology.yaml --explain pulsar1",
    "pulsarlab inventory validate hosts.yaml",
    "pulsarlab render --topology hosts.yaml --runtime ansible --out site/",
    "pulsarlab render --topology my-hosts.yaml --runtime ansible --out site/",
})

# Why the other documented commands are not run by the docs tier (each still parses: unit tier).
# The first rule whose words begin the command applies.
NOT_RUN: tuple[tuple[tuple[str, ...], str], ...] = (
    (("pulsarlab", "up"), "starts a cluster (test_smoke_lifecycle, test_sync, test_geo, test_docker_runtime start them)"),
    (("pulsarlab", "down"), "takes down the cluster the other commands read"),
    (("pulsarlab", "attach"), "needs a Compose project or Ansible hosts (test_compose_files, test_ansible)"),
    (("pulsarlab", "status", "--state-dir"), "reads Ansible hosts' state (test_ansible)"),
    (("pulsarlab", "configure", "--dry-run", "--state-dir"), "reads a Compose project (test_compose_files)"),
    (("pulsarlab", "inspect", "placement", "--state-dir"), "reads a Compose project or Ansible hosts"),
    (("pulsarlab", "inspect", "replication"), "geo-replication: a geo deployment (test_geo)"),
    (("pulsarlab", "node"), "faults on nodes of sync (bk1-eu, region:us): test_sync, test_chaos"),
    (("pulsarlab", "chaos"), "faults on sync's regions and nodes: test_chaos, test_sync"),
    (("pulsarlab", "upgrade"), "restarts every node (test_upgrade)"),
    (("pulsarlab", "workload"), "a 30-300 s workload (test_workload, test_install)"),
    (("pulsarlab", "verify"), "a Spark job over a run's history (test_install, test_verify)"),
    (("pulsarlab", "report"), "a run's or a matrix's folder (test_report_page, test_report_index)"),
    (("pulsarlab", "history"), "an S3 bucket (test_history_location)"),
    (("pulsarlab", "scenario", "run"), "starts clusters, minutes each (tests/scenarios, test_builtin_scenarios)"),
    (("pulsarlab", "token"), "a secure cluster (test_secure)"),
    (("pulsarlab", "grant"), "a secure cluster (test_secure)"),
    (("pulsarlab", "monitoring"), "Prometheus beside the cluster (test_monitoring)"),
    (("pulsarlab", "hosts"), "rehearsal hosts on Docker (test_ansible)"),
    (("pulsarlab", "image"), "a Docker engine (test_docker_image)"),
    (("pulsarlab", "logs", "pulsar1", "-f"), "follows the log until Ctrl-C"),
    (("pulsarlab", "doctor"), "its verdict is the machine's (Docker, memory), not the docs'"),
    (("pip",), "installs: .ci/run does, from a clean clone"),
    (("python", "-m", "pytest"), "the test command itself: .ci/run runs it"),
    (("python", "-m", "ruff"), "lint: .ci/run runs it"),
    (("lint-imports",), "lint: .ci/run runs it"),
    (("python", "-m", "mypy"), "type checks: .ci/run runs them"),
    (("PULSARLAB_PULSAR_VERSION=4.0.9",), "Pulsar 4.0.9: a release not served on this machine"),
    (("pulsarlab", "render", "--topology", "hosts.yaml", "--runtime", "ansible", "--distribution"),
     "a 4.0.9 tarball: a release not served on this machine"),
    (("python", "-m", "pulsarlab.verify.standalone"), "a Spark standalone cluster until Ctrl-C (test_spark_cluster)"),
    (("ansible-playbook",), "Ansible hosts (test_ansible)"),
    (("docker",), "a Docker engine and Compose (test_compose_files)"),
    (("eval",), "starts a Docker engine (scripts/docker-engine)"),
    (("scripts/docker-engine",), "a Docker engine"),
    (("export",), "sets a variable for the Ansible lines after it"),
    (("$PULSAR_HOME/bin/pulsar-admin",), "a secure cluster's client.conf (test_secure)"),
    (("curl",), "a bookie and a broker of Ansible hosts (BOOKIE, BROKER)"),
    (("wait",), "part of a drill on Ansible hosts"),
    (("echo",), "part of a drill on Ansible hosts"),
)


def not_run_reason(command: DocCommand) -> str | None:
    """Why the docs tier leaves ``command`` out, or None (it must then be in RUN_ON_SMOKE)."""
    written = (*command.env, *command.argv)
    for words, reason in NOT_RUN:
        if written[: len(words)] == words:
            return reason
    return None
