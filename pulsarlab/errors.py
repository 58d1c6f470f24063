"""Typed errors. Each carries what a user needs to act on it, and the exit code it means.

One table for every command (docs: DESIGN, ``pulsarlab --help``): 0 holds / pass, 1 a check
failed, the cluster is unhealthy, or the work could not be done, 2 usage or bad input (before
anything starts), 3 inconclusive (evidence missing or contradicting itself). The CLI's one handler
(:mod:`pulsarlab.cli.handler`) prints ``str(err)`` on stderr and exits with ``err.exit_code``.
"""

from __future__ import annotations


class PulsarlabError(Exception):
    """Base class of every error pulsarlab reports to a user."""

    exit_code = 1
    #: the command printed its result (its --json document included) before failing: the handler
    #: then adds only the reason on stderr, never a second document on stdout
    result_shown = False


class Outcome(PulsarlabError):
    """A command did its work and its answer is not "holds"; usually raised once its result is printed."""

    def __init__(self, reason: str, *, result_shown: bool = False) -> None:
        super().__init__(reason)
        self.result_shown = result_shown


class CheckFailed(Outcome):
    """What a command checks does not hold: a verdict's check failed, a node is not ready, a
    placement flag is raised, a required tool is missing."""

    exit_code = 1


class Inconclusive(Outcome):
    """The evidence is missing or contradicts itself: neither pass nor fail can be said."""

    exit_code = 3


class WorkloadFailed(PulsarlabError):
    """A workload run did not record a complete history (nothing sent, a driver failed)."""


class TopologyError(PulsarlabError):
    """A topology spec breaks a rule. ``field`` is a dotted path into the spec. Bad input, found
    before anything starts."""

    exit_code = 2

    def __init__(self, field: str, rule: str, more: list[TopologyError] | None = None) -> None:
        self.field = field
        self.rule = rule
        self.problems = [(field, rule), *((e.field, e.rule) for e in more or [])]
        if len(self.problems) == 1:
            super().__init__(f"invalid topology: {field}: {rule}")
        else:
            shown = "; ".join(f"{f}: {r}" for f, r in self.problems)
            super().__init__(f"invalid topology, {len(self.problems)} problems: {shown}")

    @classmethod
    def of(cls, problems: list[TopologyError]) -> TopologyError:
        """One error naming every problem found (the first one's field and rule as its own); an
        error that already names several brings each of them."""
        (field, rule), *rest = [pair for e in problems for pair in e.problems]
        return cls(field, rule, [cls(f, r) for f, r in rest])


class DistributionError(PulsarlabError):
    """The Pulsar server distribution or the JDK it needs cannot be had."""


class PortInUseError(PulsarlabError):
    """An address/port a node needs is already bound by another process."""

    def __init__(self, node: str, address: str, port: int, holder: str = "") -> None:
        self.node, self.address, self.port, self.holder = node, address, port, holder
        by = f", held by {holder}" if holder else ""
        super().__init__(f"port in use: {address}:{port} (needed by node {node}{by}); nothing was started")


class NodeStartError(PulsarlabError):
    """A node did not become ready in time; names the node, what was awaited, and its log tail."""

    def __init__(self, node: str, waited_for: str, timeout: float, log_tail: str, detail: str = "") -> None:
        self.node, self.waited_for, self.timeout, self.log_tail = node, waited_for, timeout, log_tail
        msg = f"node {node}: timed out after {timeout:.0f}s waiting for {waited_for}"
        if detail:
            msg += f" ({detail})"
        if log_tail:
            msg += f"\n--- last lines of {node}'s log ---\n{log_tail}"
        super().__init__(msg)


class ProcessFailedError(PulsarlabError):
    """An external command exited non-zero: carries the command, exit code and output."""

    def __init__(self, command: list[str], exit_code: int, output: str) -> None:
        self.command, self.returncode, self.output = command, exit_code, output
        tail = "\n".join(output.splitlines()[-30:])
        super().__init__(f"command failed with exit code {exit_code}: {' '.join(command)}\n{tail}")


class UsageError(PulsarlabError):
    """The command was asked for something that cannot be: a missing folder, an unknown name."""

    exit_code = 2


class StateError(PulsarlabError):
    """The state directory says something that does not allow the requested operation."""


ENGINE_FIX = "run `scripts/docker-engine start` and export the DOCKER_HOST it prints"


class DockerClientMissingError(PulsarlabError):
    """No ``docker`` command-line client to drive the engine with."""

    def __init__(self) -> None:
        super().__init__(f"no docker client: the `docker` command is not on PATH; {ENGINE_FIX} (it installs Debian's docker.io)")


class DockerEngineError(PulsarlabError):
    """No Docker engine answers at the DOCKER_HOST in use."""

    def __init__(self, host: str, detail: str) -> None:
        self.host = host
        super().__init__(f"no Docker engine answering at {host} ({detail}); {ENGINE_FIX}")


class ComposePluginMissingError(PulsarlabError):
    """The ``docker compose`` (v2) CLI plugin is not installed."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"no Docker Compose v2 plugin: `docker compose version` failed ({detail}); "
                         "run `scripts/docker-engine start` (it builds and installs the plugin once per machine)")


class ImageMissingError(PulsarlabError):
    """The Pulsar image a docker deployment needs is not in the engine."""

    def __init__(self, image: str, host: str) -> None:
        self.image = image
        super().__init__(f"image {image} is not in the Docker engine at {host}: build it with `pulsarlab image build` "
                         "(`up` builds pulsarlab's own image itself unless --no-build), or pass `--image` naming one "
                         "the engine has")


class ImageBuildError(PulsarlabError):
    """Building the base or the Pulsar image failed; carries the stage and the tool's output."""


def yaml_problem(path: object, exc: Exception) -> str:
    """A YAML parser's error in one line, as editors and compilers say it: ``FILE:LINE:COLUMN:
    problem`` (PyYAML's own text spans several lines and names no file)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    context = getattr(exc, "context", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return f"{where}: {problem}" + (f" ({context})" if context else "")
