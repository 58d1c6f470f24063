"""The Pulsar release each node runs, as the node itself reports it (not as pulsarlab recorded it).

- broker: ``GET /admin/v2/brokers/version``, the broker's own answer;
- ZooKeeper: the four-letter command ``envi``, whose ``java.class.path`` lists the jars the server
  loaded (the ``org.apache.pulsar-pulsar-broker-<release>.jar`` of the distribution it runs from);
  ``srvr`` adds ZooKeeper's own release;
- bookie: BookKeeper's HTTP admin and its metrics name no release (checked on Pulsar 4.0.6 and
  4.0.8, both with BookKeeper 4.17.2), so the bookie's JVM's own command line is read (``/proc``
  on this machine): the class path names the distribution's ``lib/``, whose pulsar-broker jar says
  the release (in a container, that folder is read through the JVM's ``/proc/PID/root``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import requests

from pulsarlab.runtime.waits import zk_command
from pulsarlab.security import ClientAuth

BROKER_JAR = re.compile(r"org\.apache\.pulsar-pulsar-broker-(\d[\w.-]*?)\.jar")

BROKER_SOURCE = "broker: GET /admin/v2/brokers/version"
ZOOKEEPER_SOURCE = "zookeeper: 'envi' java.class.path"
BOOKIE_SOURCE = "bookie: its JVM's class path (/proc/PID/cmdline)"


@dataclass(frozen=True)
class Reported:
    """What a node says of its release: ``version`` None when it did not answer (down, paused)."""

    version: str | None
    source: str
    detail: str = ""  # what else it said (ZooKeeper's own release), or why there is no answer


def broker(url: str, auth: ClientAuth | None = None) -> Reported:
    try:
        if auth is None:
            r = requests.get(f"{url}/admin/v2/brokers/version", timeout=3)
        else:
            r = requests.get(f"{url}/admin/v2/brokers/version", timeout=3, headers=auth.headers(), verify=auth.verify)
    except requests.RequestException as exc:
        return Reported(None, BROKER_SOURCE, type(exc).__name__)
    if not r.ok:
        return Reported(None, BROKER_SOURCE, f"HTTP {r.status_code}")
    return Reported(r.text.strip().strip('"') or None, BROKER_SOURCE)


def zookeeper(address: str, port: int) -> Reported:
    try:
        envi = zk_command(address, port, b"envi")
        srvr = zk_command(address, port, b"srvr")
    except OSError as exc:
        return Reported(None, ZOOKEEPER_SOURCE, str(exc))
    found = BROKER_JAR.search(envi)
    own = re.search(r"Zookeeper version: ([^-,\s]+)", srvr)
    return Reported(found.group(1) if found else None, ZOOKEEPER_SOURCE,
                    f"ZooKeeper {own.group(1)}" if own else "srvr named no ZooKeeper release")


def from_command_line(args: list[str] | None, source: str = BOOKIE_SOURCE, root: Path | None = None) -> Reported:
    """The release of the distribution a JVM's class path (``-cp``/``-classpath``) comes from; its
    paths are read under ``root`` (a container's JVM: ``/proc/PID/root``, its own file system)."""
    if not args:
        return Reported(None, source, "no process")
    for flag, value in zip(args, args[1:], strict=False):
        if flag in ("-cp", "-classpath", "--class-path"):
            version = class_path_version(value, root)
            if version is not None:
                return Reported(version, source)
    return Reported(None, source, "no Pulsar distribution on its class path")


def class_path_version(class_path: str, root: Path | None = None) -> str | None:
    """The Pulsar release of the first class-path entry that is (or lies in) a distribution's ``lib/``."""
    for entry in class_path.split(":"):
        if found := BROKER_JAR.search(entry):
            return found.group(1)
        folder = Path(entry.removesuffix("*").rstrip("/"))
        if root is not None and folder.is_absolute():
            folder = root / folder.relative_to("/")
        if folder.name == "lib" and folder.is_dir():
            for jar in folder.glob("org.apache.pulsar-pulsar-broker-*.jar"):
                if found := BROKER_JAR.fullmatch(jar.name):
                    return found.group(1)
    return None
