"""Every ``pulsarlab`` command the docs show (README.md and docs/, in fenced blocks and inline
code) parses against the CLI as it is: no unknown command or option, no extra argument, and in
blocks no missing option or argument (inline code may name a command without its arguments, as
prose does). Values are examples and are not checked; ``[...]`` marks an optional part, checked
as given. So the docs cannot drift from the CLI without this tier going red."""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from pulsarlab.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^\s*```")
INLINE = re.compile(r"`(pulsarlab [^`]+)`")
SUBSHELL = re.compile(r"\$\((pulsarlab [^)]*)\)")
REDIRECT = re.compile(r"\d?>>?.*|<|&")
# options whose callbacks act as they are parsed (typer's completion installs into the shell's rc
# file): known to the root command, left out of the parse
ACTING = ("--install-completion", "--show-completion")


def _logical_lines(lines: list[str]) -> list[str]:
    """Lines with their backslash continuations joined, without a leading ``$ `` prompt."""
    out, buf = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((buf + line).strip().removeprefix("$ "))
        buf = ""
    return out


def shown_commands(text: str) -> list[tuple[int, str, bool]]:
    """(line, command, whether it is inline code) of every pulsarlab command a markdown text shows."""
    found: list[tuple[int, str, bool]] = []
    block: list[str] | None = None
    start = 0
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            if block is None:
                block, start = [], n
            else:
                for logical in _logical_lines(block):
                    found += [(start, m.group(1), False) for m in SUBSHELL.finditer(logical)]
                    found += [(start, seg.strip(), False) for seg in re.split(r"&&|\|\||;|\|", logical)
                              if seg.strip().startswith("pulsarlab ")]
                block = None
        elif block is not None:
            block.append(line)
        else:
            found += [(n, m.group(1), True) for m in INLINE.finditer(line)]
    return found


@functools.cache
def _root() -> Any:
    return typer.main.get_command(app)  # built from the typer app: once, not per command


def variants(command: str) -> list[str]:
    """A command with ``a|b|c`` alternatives in a word, once per alternative (of each such word)."""
    words = command.split(" ")
    for i, w in enumerate(words):
        if "|" in w and not w.startswith(("'", '"')):
            return [v for alt in w.split("|") for v in variants(" ".join([*words[:i], alt, *words[i + 1:]]))]
    return [command]


def parse_problem(command: str, partial: bool = False) -> str | None:
    """Why the CLI would refuse ``command``'s words (None: it parses; ``partial``: a missing
    option or argument is no problem). Runs nothing."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as exc:
        return f"not shell words: {exc}"
    cut = next((i for i, w in enumerate(words) if REDIRECT.fullmatch(w)), len(words))
    args = [w.removeprefix("[").removesuffix("]") for w in words[1:cut]]
    acting = [a for a in args if a in ACTING]
    args = [a for a in args if a not in ("", "...", "…", *ACTING)]
    if acting and not args:
        return None  # the root command with its completion options
    cmd, ctx, name = _root(), None, "pulsarlab"
    try:
        while True:
            ctx = cmd.make_context(name, args, parent=ctx)
            if not hasattr(cmd, "resolve_command"):  # a command, not a group: parsed whole
                return None
            args = [*ctx.__dict__.get("_protected_args", []), *ctx.args]
            if not args:
                return None
            name, cmd, args = cmd.resolve_command(ctx, args)
    except Exception as exc:  # typer's click: its classes are matched by name
        kinds = {k.__name__ for k in type(exc).__mro__}
        if "Exit" in kinds or ("BadParameter" in kinds and "MissingParameter" not in kinds):
            return None  # --help; an example value the type would refuse (a path that is not here)
        if partial and kinds & {"MissingParameter", "NoArgsIsHelpError", "BadOptionUsage"}:
            return None  # prose naming a command or an option without what follows
        if "UsageError" in kinds:
            return exc.format_message()  # type: ignore[attr-defined]
        raise


def test_every_command_the_docs_show_parses() -> None:
    shown = [(doc, line, c, inline) for doc in DOCS for line, c, inline in shown_commands(doc.read_text())]
    assert len(shown) > 100, "the docs' commands were not found"
    wrong = [f"{doc.relative_to(ROOT)}:{line}: {v}\n    {why}" for doc, line, c, inline in shown
             for v in variants(c) if (why := parse_problem(v, partial=inline))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("command", "says"), [
    ("pulsarlab render --out DIR", "Missing option '--topology'"),
    ("pulsarlab inspect placement --state-dir site/state TOPIC", "unexpected extra argument"),
    ("pulsarlab up --topologyy smoke", "No such option: --topologyy"),
    ("pulsarlab nosuch", "No such command 'nosuch'"),
])
def test_the_check_catches_the_drift_the_docs_once_had(command: str, says: str) -> None:
    problem = parse_problem(command)
    assert problem is not None and says in problem, problem


def test_alternatives_are_checked_each() -> None:
    assert variants("pulsarlab node stop|start bk1") == ["pulsarlab node stop bk1", "pulsarlab node start bk1"]
    assert "No such command 'halt'" in (parse_problem(variants("pulsarlab node stop|halt bk1")[1]) or "")


def test_commands_are_found_in_blocks_inline_and_subshells() -> None:
    text = ("Run `pulsarlab status --json` first.\n```bash\n$ pulsarlab up \\\n  --topology smoke  # a comment\n"
            "eval \"$(pulsarlab env)\" && pulsarlab down > out.txt\n```\n")
    assert [(c, inline) for _, c, inline in shown_commands(text)] == [
        ("pulsarlab status --json", True), ("pulsarlab up    --topology smoke  # a comment", False),
        ("pulsarlab env", False), ("pulsarlab down > out.txt", False)]
    assert parse_problem("pulsarlab grant", partial=True) is None
    assert "Missing argument" in (parse_problem("pulsarlab grant") or "")
    assert parse_problem("pulsarlab down > out.txt") is None and parse_problem("pulsarlab up --topology smoke # x") is None
