"""Finding and checking the Docker engine pulsarlab drives: client, engine, Compose plugin, images.

The docker runtime calls :func:`check` (or :func:`client`) before it starts anything, so a missing
part is one clear error naming its fix instead of a failure halfway through a deployment. The engine
is the one at ``DOCKER_HOST``, or else the private one ``scripts/docker-engine start`` runs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from python_on_whales import DockerClient
from python_on_whales.exceptions import NoSuchImage

from pulsarlab import settings
from pulsarlab.errors import ComposePluginMissingError, DockerClientMissingError, DockerEngineError, ImageMissingError

PING_TIMEOUT = 15.0


def state_dir() -> Path:
    """Where ``scripts/docker-engine`` keeps its engine (same rule as the script)."""
    return settings.current().docker_state


def default_host() -> str:
    """``DOCKER_HOST`` when set, else the socket of the engine ``scripts/docker-engine`` starts."""
    return settings.current().docker_host


def docker_cli() -> str:
    """Path of the ``docker`` command-line client."""
    cli = shutil.which("docker")
    if not cli:
        raise DockerClientMissingError()
    return cli


@dataclass(frozen=True)
class Engine:
    """An engine that answered, and what answered."""

    host: str
    cli: str
    server_version: str
    api_version: str
    compose_version: str | None


def _run(cmd: list[str], timeout: float, host: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DockerEngineError(host, f"`{' '.join(cmd[1:4])} ...` got no answer within {timeout:.0f}s") from None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def ping(host: str | None = None, timeout: float = PING_TIMEOUT) -> tuple[str, str]:
    """(server version, API version) of the engine at ``host``; :class:`DockerEngineError` if none answers."""
    host = host or default_host()
    cli = docker_cli()
    if host.startswith("unix://") and not Path(host.removeprefix("unix://")).exists():
        raise DockerEngineError(host, f"no socket at {host.removeprefix('unix://')}")
    proc = _run([cli, "--host", host, "version", "--format", "{{json .Server}}"], timeout, host)
    server = None
    if proc.returncode == 0:
        try:
            server = json.loads(proc.stdout)
        except json.JSONDecodeError:
            server = None
    if not server:
        raise DockerEngineError(host, _last_line(proc.stderr or proc.stdout))
    return str(server.get("Version", "?")), str(server.get("ApiVersion", "?"))


def compose_version(host: str | None = None, timeout: float = PING_TIMEOUT) -> str:
    """Version of the ``docker compose`` v2 plugin; :class:`ComposePluginMissingError` if absent."""
    host = host or default_host()
    cli = docker_cli()
    try:
        proc = subprocess.run([cli, "compose", "version", "--short"], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ComposePluginMissingError(f"no answer within {timeout:.0f}s") from None
    version = proc.stdout.strip()
    if proc.returncode != 0 or not version:
        raise ComposePluginMissingError(_last_line(proc.stderr or proc.stdout))
    if not version.lstrip("v").startswith("2."):
        raise ComposePluginMissingError(f"found version {version}, need 2.x")
    return version


def check(host: str | None = None, compose: bool = True) -> Engine:
    """Client, engine and (unless ``compose=False``) the Compose plugin, each or a typed error."""
    host = host or default_host()
    cli = docker_cli()
    if not compose:
        return Engine(host, cli, *ping(host), None)
    with ThreadPoolExecutor(1) as pool:  # two CLI starts at once: every docker command waits for this
        plugin = pool.submit(compose_version, host)
        server, api = ping(host)  # the engine's error first: without one, the plugin does not matter
        return Engine(host, cli, server, api, plugin.result())


def client(host: str | None = None, compose: bool = False, **kwargs) -> DockerClient:
    """A python-on-whales client for an engine that answered; ``kwargs`` go to ``DockerClient``
    (e.g. ``compose_files``, ``compose_project_name``)."""
    engine = check(host, compose=compose)
    return DockerClient(host=engine.host, client_call=[engine.cli], **kwargs)


def require_image(image: str, docker: DockerClient | None = None, host: str | None = None) -> str:
    """Id of ``image`` in the engine; :class:`ImageMissingError` naming the fix if it is not there."""
    docker = docker or client(host)
    try:
        return docker.image.inspect(image).id
    except NoSuchImage:
        raise ImageMissingError(image, host or default_host()) from None
