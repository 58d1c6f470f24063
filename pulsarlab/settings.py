"""pulsarlab's own settings, read from the environment here and nowhere else.

:func:`current` reads them afresh on each call (a dozen lookups), so a caller or a test that
changes the environment sees the change; everything else asks this module, never ``os.environ``.
Environment that pulsarlab only hands on to child processes (the JVMs, Spark, Ansible) is not a
setting and stays where those processes are started. An empty variable counts as unset.

=========================  =================================================================
PULSARLAB_STATE_DIR        the cluster a command acts on when ``--state-dir`` is not given
PULSARLAB_PULSAR_VERSION   the Pulsar release (default 4.0.8, the newest 4.0 LTS patch)
PULSARLAB_CACHE            downloads and builds (default ``$XDG_CACHE_HOME/pulsarlab``)
PULSARLAB_MAVEN_REPO       where ``mvn`` puts the distribution (default ``~/.m2/repository``)
PULSARLAB_TIMEOUT_SCALE    multiplies every readiness timeout (default 1)
PULSARLAB_DOCKER_STATE     ``scripts/docker-engine``'s folder (default ``$XDG_STATE_HOME/pulsarlab/docker``)
PULSARLAB_KNOWN_CLUSTERS   where ``pulsarlab ls`` finds every cluster's state folder (default
                           ``$XDG_STATE_HOME/pulsarlab/clusters``)
DOCKER_HOST                the Docker engine (default: the socket in that folder)
PULSARLAB_PROMETHEUS       the ``prometheus`` binary (default: the one on PATH)
PULSARLAB_TEMPLATES        another folder of Jinja templates (default: the shipped ``templates/``)
JAVA_HOME                  the JDK (default: ``java`` on PATH)
=========================  =================================================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.errors import UsageError

DEFAULT_PULSAR_VERSION = "4.0.8"
STATE_ROOT = Path(".pulsarlab")  # relative: each working directory has its own clusters


@dataclass(frozen=True)
class Settings:
    state_dir: Path | None
    pulsar_version: str
    cache_dir: Path
    maven_repo: Path
    timeout_scale_text: str | None  # as given: checked where it is used, so a bad value is a usage error, not an import crash
    docker_state: Path
    docker_host: str
    prometheus: str | None
    templates_dir: Path | None
    java_home: Path | None
    known_clusters: Path
    state_root: Path = STATE_ROOT

    @classmethod
    def from_env(cls, env: Mapping[str, str], home: Path | None = None) -> Settings:
        def get(name: str) -> str | None:
            return env.get(name) or None

        def path(name: str) -> Path | None:
            value = get(name)
            return Path(value).expanduser() if value else None

        home = home or Path.home()
        state_home = (path("XDG_STATE_HOME") or home / ".local" / "state") / "pulsarlab"
        docker_state = path("PULSARLAB_DOCKER_STATE") or state_home / "docker"
        return cls(
            state_dir=path("PULSARLAB_STATE_DIR"),
            pulsar_version=get("PULSARLAB_PULSAR_VERSION") or DEFAULT_PULSAR_VERSION,
            cache_dir=path("PULSARLAB_CACHE") or (path("XDG_CACHE_HOME") or home / ".cache") / "pulsarlab",
            maven_repo=path("PULSARLAB_MAVEN_REPO") or home / ".m2" / "repository",
            timeout_scale_text=get("PULSARLAB_TIMEOUT_SCALE"),
            docker_state=docker_state,
            docker_host=get("DOCKER_HOST") or f"unix://{docker_state / 'docker.sock'}",
            prometheus=get("PULSARLAB_PROMETHEUS"),
            templates_dir=path("PULSARLAB_TEMPLATES"),
            java_home=path("JAVA_HOME"),
            known_clusters=path("PULSARLAB_KNOWN_CLUSTERS") or state_home / "clusters",
        )

    @property
    def timeout_scale(self) -> float:
        return _scale(self.timeout_scale_text)

    def check(self) -> None:
        """Raise :class:`UsageError` on a value that cannot be used (before any command starts anything)."""
        _scale(self.timeout_scale_text)

    def cluster_dir(self, topology_name: str) -> Path:
        """Where a cluster of this topology keeps its state unless ``--state-dir`` says otherwise."""
        return self.state_dir or self.state_root / topology_name


def _scale(value: str | None) -> float:
    if value is None:
        return 1.0
    try:
        scale = float(value)
    except ValueError:
        scale = 0.0
    if not scale > 0 or scale == float("inf"):
        raise UsageError(f"PULSARLAB_TIMEOUT_SCALE must be a number above 0 (got {value!r})")
    return scale


def current() -> Settings:
    """The settings the environment gives now."""
    return Settings.from_env(os.environ)
