"""The docker engine checks and image inputs without an engine: each missing part is one error naming its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pulsarlab.cli import app
from pulsarlab.errors import ComposePluginMissingError, DockerClientMissingError, DockerEngineError
from pulsarlab.runtime.docker import engine, image

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-engine"
runner = CliRunner()


def test_missing_socket_names_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = tmp_path / "nowhere" / "docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    with pytest.raises(DockerEngineError) as info:
        engine.check()
    msg = str(info.value)
    assert str(sock) in msg
    assert "scripts/docker-engine start" in msg and "DOCKER_HOST" in msg


def test_socket_nobody_listens_on_is_no_engine(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))  # bound, never listening: connections are refused
    try:
        with pytest.raises(DockerEngineError, match="scripts/docker-engine start"):
            engine.ping(f"unix://{path}", timeout=20)
    finally:
        s.close()


def test_no_docker_client_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DockerClientMissingError, match="docker-engine start"):
        engine.check("unix:///nowhere.sock")


def test_no_compose_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an empty client config folder: the plugin installed per user is not found there
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    system_plugins = [Path(d) / "docker-compose" for d in
                      ("/usr/local/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins", "/usr/lib/docker/cli-plugins")]
    if any(p.exists() for p in system_plugins):
        pytest.skip("a system-wide compose plugin is installed; it cannot be hidden per test")
    with pytest.raises(ComposePluginMissingError, match="scripts/docker-engine start"):
        engine.compose_version()


def test_default_host_follows_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setenv("PULSARLAB_DOCKER_STATE", str(tmp_path))
    assert engine.default_host() == f"unix://{tmp_path}/docker.sock"
    out = subprocess.run([str(SCRIPT), "status"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PULSARLAB_DOCKER_STATE": str(tmp_path)})
    assert out.returncode == 1
    assert "not running" in out.stdout and f"DOCKER_HOST=unix://{tmp_path}/docker.sock" in out.stdout


def test_script_rejects_unknown_command() -> None:
    out = subprocess.run([str(SCRIPT), "restart"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "start|stop|status" in out.stderr


def test_image_build_without_engine_is_one_clear_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["image", "build", "--host", f"unix://{tmp_path}/docker.sock"])
    assert result.exit_code == 1
    assert "no Docker engine answering" in result.stderr and "scripts/docker-engine start" in result.stderr


def test_apt_sources_both_formats(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n")
    (tmp_path / "sources.list.d" / "other.list").write_text("deb http://elsewhere.example/x stable main\n")
    mirror, files = image.apt_sources("bookworm", tmp_path)
    assert mirror == "http://mirror.example/debian"
    assert [f.name for f in files] == ["debian.sources"]
    (tmp_path / "sources.list").write_text("deb [arch=amd64] http://old.example/debian bookworm main\n")
    mirror, files = image.apt_sources("bookworm", tmp_path)
    assert mirror == "http://old.example/debian" and len(files) == 2
    assert image.apt_sources("trixie", tmp_path) == (image.DEFAULT_MIRROR, [])


def test_distribution_checksum_tracks_contents_not_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULSARLAB_CACHE", str(tmp_path / "cache"))
    home = tmp_path / "dist"
    (home / "lib").mkdir(parents=True)
    (home / "logs").mkdir()
    (home / "lib" / "a.jar").write_bytes(b"one")
    first = image.distribution_checksum(home)
    (home / "logs" / "broker.log").write_text("noise")
    assert image.distribution_checksum(home) == first
    (home / "lib" / "a.jar").write_bytes(b"two")
    assert image.distribution_checksum(home) != first


def _start_with(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """``scripts/docker-engine start`` with its caches and plugin folder in tmp_path and no engine state."""
    return subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, timeout=120, env={
        **os.environ, "PULSARLAB_CACHE": str(tmp_path / "cache"), "DOCKER_CONFIG": str(tmp_path / "config"),
        "PULSARLAB_DOCKER_STATE": str(tmp_path / "state"), **env})


def _packages_in_place() -> None:
    if not all(shutil.which(c) for c in ("dockerd", "debootstrap", "ip")):
        pytest.skip("scripts/docker-engine start would install docker.io, debootstrap or iproute2 first")


def test_script_refuses_an_unknown_compose_source_before_starting_anything(tmp_path: Path) -> None:
    _packages_in_place()
    out = _start_with(tmp_path, PULSARLAB_COMPOSE_SOURCE="npm")
    assert out.returncode == 1 and "PULSARLAB_COMPOSE_SOURCE is 'npm': debian or go" in out.stderr, out.stderr
    assert out.stdout == "" and not (tmp_path / "config").exists() and not (tmp_path / "state").exists()


def test_an_unreachable_debian_mirror_is_one_error_naming_it_and_the_other_source(tmp_path: Path) -> None:
    _packages_in_place()
    mirror = "http://127.0.0.1:9/debian"  # the discard port: nothing listens, the connection is refused
    out = _start_with(tmp_path, PULSARLAB_DEBIAN_MIRROR=mirror, PULSARLAB_COMPOSE_SOURCE="debian")
    assert out.returncode == 1, out.stderr
    assert f"could not fetch docker-compose from Debian trixie at {mirror}" in out.stderr
    assert "PULSARLAB_COMPOSE_SOURCE=go" in out.stderr
    cache = tmp_path / "cache" / "docker"
    assert sorted(p.name for p in cache.iterdir()) == ["compose-build.lock"]  # no plugin, no apt folder left
    assert out.stdout == "" and not (tmp_path / "config").exists() and not (tmp_path / "state").exists()
