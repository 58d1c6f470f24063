"""A deployment's digest (``pulsarlab.identity``): the cgroups, packet-filter comments, compose
project and class-archive recordings of one state directory all carry the same one."""

from __future__ import annotations

from pathlib import Path

from pulsarlab.chaos import netfilter
from pulsarlab.classdata import ClassArchives
from pulsarlab.identity import state_digest
from pulsarlab.runtime import cgroup
from pulsarlab.runtime.cds import node_recording
from pulsarlab.runtime.docker import compose
from pulsarlab.topology import load


def test_one_directory_one_digest_however_it_is_named(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "state"
    d.mkdir()
    (tmp_path / "link").symlink_to(d)
    monkeypatch.chdir(tmp_path)
    digest = state_digest(d)
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert state_digest(Path("state")) == digest  # relative
    assert state_digest(str(tmp_path / "link")) == digest  # through a symlink
    assert state_digest(tmp_path / "other") != digest


def test_every_name_a_deployment_gives_outside_carries_it(tmp_path: Path) -> None:
    digest = state_digest(tmp_path)
    # compose once used 8 characters and the class-data recordings 8: a deployment had two names
    assert compose.project_name(load("smoke"), tmp_path) == f"pulsarlab-smoke-{digest}"
    assert cgroup.node_path(tmp_path, "bk1") == f"pulsarlab/{digest}/bk1"
    assert netfilter.identity(tmp_path) == f"pulsarlab:{digest}"
    recording = node_recording(ClassArchives(tmp_path / "cds"), "broker", "pulsar1", tmp_path)
    assert recording.name == f"broker.pulsar1.{digest}.jsa.part"
