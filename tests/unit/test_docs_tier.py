"""Every shell command README.md and docs/ show, of any program, is either run by the docs tier
(``tests/docs/test_docs.py``, against a smoke cluster) or left out with a reason; and what a
non-pulsarlab line names exists (playbooks, Compose files, scripts, modules, pip extras). So a
command added to the docs is accounted for the day it is written. (``test_docs_commands.py``
parses the pulsarlab ones against the CLI.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs_commands import RUN_ON_SMOKE, DocCommand, documented_commands, not_run_reason, other_problem

COMMANDS = documented_commands()


def test_the_docs_show_commands_of_every_kind() -> None:
    programs = {c.argv[0] for c in COMMANDS}
    assert len(COMMANDS) > 100 and {"pulsarlab", "ansible-playbook", "docker", "pip"} <= programs
    assert {c.file for c in COMMANDS} >= {"README.md", "docs/ansible.md", "docs/compose.md", "docs/runbooks/upgrade.md"}


def test_every_other_documented_command_names_what_exists() -> None:
    problems = [f"{c.where}: {c.text}: {p}" for c in COMMANDS if c.argv[0] != "pulsarlab" for p in [other_problem(c.argv)] if p]
    assert not problems, "\n".join(problems)


def test_every_documented_command_is_run_by_the_docs_tier_or_says_why_not() -> None:
    texts = {c.text for c in COMMANDS}
    assert texts >= RUN_ON_SMOKE, f"run by the docs tier but no longer documented: {sorted(RUN_ON_SMOKE - texts)}"
    loose = [f"{c.where}: {c.text}" for c in COMMANDS if c.text not in RUN_ON_SMOKE and not_run_reason(c) is None]
    assert not loose, "neither run by tests/docs/test_docs.py nor in NOT_RUN with a reason:\n" + "\n".join(loose)


def test_lines_split_into_commands_with_their_environment(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("```sh\nA=1 pulsarlab ls && pulsarlab verify runs/1 \\\n  --out v.json &\nwait\n```\n"
                   "```yaml\nnot: a command\n```\n")
    found = documented_commands((doc,))
    assert [(c.env, c.argv, c.line) for c in found] == [
        (("A=1",), ("pulsarlab", "ls"), 2),  # the line after the fence
        ((), ("pulsarlab", "verify", "runs/1", "--out", "v.json"), 2),  # continued on line 3
        ((), ("wait",), 4),
    ]
    assert found[0].text == "A=1 pulsarlab ls"


@pytest.mark.parametrize(("argv", "problem"), [
    (("ansible-playbook", "-i", "site/inventory.yml", "playbooks/nothing.yml"), "no playbook playbooks/nothing.yml"),
    (("docker", "compose", "-f", "compose/none.yml", "up"), "no Compose file compose/none.yml"),
    (("python", "-m", "pulsarlab.nothing"), "no module pulsarlab.nothing"),
    (("pip", "install", "-e", ".[nothing]"), "no pip extra nothing"),
    (("scripts/nothing", "start"), "no script scripts/nothing"),
    (("ansible-playbook", "-i", "site/inventory.yml", "playbooks/deploy.yml"), None),
    (("pip", "install", "-e", ".[dev]"), None),
])
def test_a_missing_playbook_compose_file_module_or_extra_is_named(argv: tuple[str, ...], problem: str | None) -> None:
    assert other_problem(argv) == problem


def test_a_command_neither_run_nor_excused_is_caught() -> None:
    assert not_run_reason(DocCommand("README.md", 1, "pulsarlab frobnicate", ("pulsarlab", "frobnicate"))) is None
    assert not_run_reason(DocCommand("README.md", 1, "pulsarlab up", ("pulsarlab", "up"))) is not None
    with_env = DocCommand("x.md", 1, "PULSARLAB_PULSAR_VERSION=4.0.9 pulsarlab render",
                          ("pulsarlab", "render"), ("PULSARLAB_PULSAR_VERSION=4.0.9",))
    assert not_run_reason(with_env) is not None
