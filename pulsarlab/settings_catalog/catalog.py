"""What settings a Pulsar release knows, per role: read from the distribution itself once per
version and cached as JSON under the user's cache folder.

* broker: the keys of the shipped ``conf/broker.conf`` and the fields of
  ``org.apache.pulsar.broker.ServiceConfiguration`` (from the broker-common jar), each field's
  Java type telling what a value must be (integer, number, boolean, list, text);
* bookie: ``conf/bookkeeper.conf``'s keys and the string constants BookKeeper's configuration
  classes name their keys with (``ServerConfiguration``, ``AbstractConfiguration``,
  ``ClientConfiguration``);
* zookeeper: ``conf/zookeeper.conf``'s keys and the key-like strings ``QuorumPeerConfig`` reads.

Where no field tells a key's type (every bookie and ZooKeeper key), the shipped file's default
does when it is a boolean or a number: a value given for that key must be one too (``"64MB"``,
``"10s"`` or ``"ture"`` would fail the server's start). A number default allows any number, since
the file does not say whether the server reads an integer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pulsarlab import settings
from pulsarlab.errors import DistributionError
from pulsarlab.settings_catalog.classfile import ClassFormatError, ClassInfo, Field, read_from_jar

FORMAT = 2  # 2: types from the shipped defaults
CONF_FILE = {"broker": "broker.conf", "bookie": "bookkeeper.conf", "zookeeper": "zookeeper.conf"}
BROKER_CLASS = "org.apache.pulsar.broker.ServiceConfiguration"
BOOKIE_CLASSES = ("org.apache.bookkeeper.conf.ServerConfiguration", "org.apache.bookkeeper.conf.AbstractConfiguration",
                  "org.apache.bookkeeper.conf.ClientConfiguration")
ZOOKEEPER_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerConfig"
JARS = {"broker": "org.apache.pulsar-pulsar-broker-common-*.jar", "bookie": "org.apache.bookkeeper-bookkeeper-server-*.jar",
        "zookeeper": "org.apache.zookeeper-zookeeper-[0-9]*.jar"}
KEY_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*")
# a shipped file's key, active or commented out ("#key=value" documents a key with no default)
CONF_KEY = re.compile(r"^\s*#?\s*([A-Za-z][A-Za-z0-9_.]*)\s*=")

_INTEGER = {"I", "J", "S", "B", "Ljava/lang/Integer;", "Ljava/lang/Long;", "Ljava/lang/Short;", "Ljava/lang/Byte;"}
_NUMBER = {"D", "F", "Ljava/lang/Double;", "Ljava/lang/Float;"}
_BOOLEAN = {"Z", "Ljava/lang/Boolean;"}
_LIST = {"Ljava/util/List;", "Ljava/util/Set;", "Ljava/util/Collection;", "Ljava/util/SortedSet;"}


@dataclass(frozen=True)
class RoleCatalog:
    """One role's known keys: ``types`` (key -> integer, number, boolean, list, text; None where
    nothing tells), ``shipped`` (the shipped file's active keys and their values), ``complete``
    (True: an unknown key is an error; False: the server accepts keys no class names, a warning)."""

    types: dict[str, str | None]
    shipped: dict[str, str]
    complete: bool


@dataclass(frozen=True)
class Catalog:
    version: str
    roles: dict[str, RoleCatalog]


def field_type(f: Field) -> str:
    """What a configuration field's Java type says a value must be."""
    desc = f.descriptor
    if desc == "Ljava/util/Optional;" and f.signature:
        inner = re.search(r"<(L[^<>;]+;)", f.signature)
        desc = inner.group(1) if inner else desc
    if desc in _INTEGER:
        return "integer"
    if desc in _NUMBER:
        return "number"
    if desc in _BOOLEAN:
        return "boolean"
    if desc in _LIST:
        return "list"
    return "text"


def shipped_keys(conf: Path) -> tuple[set[str], dict[str, str]]:
    """Every key ``conf`` names (commented-out ones included) and its active keys' values."""
    named: set[str] = set()
    active: dict[str, str] = {}
    for line in conf.read_text().splitlines():
        m = CONF_KEY.match(line)
        if not m:
            continue
        named.add(m.group(1))
        if not line.lstrip().startswith("#"):
            active[m.group(1)] = line.split("=", 1)[1].strip()
    return named, active


def _jar(home: Path, role: str) -> Path:
    jars = sorted((home / "lib").glob(JARS[role]))
    if not jars:
        raise DistributionError(f"{home}/lib has no {JARS[role]}: cannot read the {role}'s configuration class")
    return jars[0]


def _classes(home: Path, role: str, names: tuple[str, ...]) -> list[ClassInfo]:
    jar = _jar(home, role)
    try:
        return [read_from_jar(jar, n) for n in names]
    except (KeyError, ClassFormatError, OSError) as exc:
        raise DistributionError(f"cannot read {', '.join(names)} from {jar}: {exc}") from None


def build(home: Path, version: str) -> Catalog:
    """Read the catalog from the distribution at ``home`` (its conf/ and lib/)."""
    roles: dict[str, RoleCatalog] = {}
    for role, conf in CONF_FILE.items():
        named, active = shipped_keys(home / "conf" / conf)
        types: dict[str, str | None] = dict.fromkeys(sorted(named))
        if role == "broker":
            (cls,) = _classes(home, role, (BROKER_CLASS,))
            types.update({f.name: field_type(f) for f in cls.fields if not f.static})
        elif role == "bookie":
            for cls in _classes(home, role, BOOKIE_CLASSES):
                types.update({str(f.constant): types.get(str(f.constant)) for f in cls.fields
                              if f.static and isinstance(f.constant, str) and KEY_LIKE.fullmatch(f.constant)})
        else:
            (cls,) = _classes(home, role, (ZOOKEEPER_CLASS,))
            types.update({s: types.get(s) for s in cls.strings if KEY_LIKE.fullmatch(s)})
        for key, default in active.items():
            if types.get(key) is None:
                types[key] = default_kind(default)
        roles[role] = RoleCatalog(types, active, complete=role == "broker")
    return Catalog(version, roles)


def default_kind(default: str) -> str | None:
    """What a shipped default value says of its key's type: boolean, number, or nothing."""
    if default.lower() in ("true", "false"):
        return "boolean"
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", default):
        return "number"
    return None


def cache_file(home: Path, version: str) -> Path:
    tag = hashlib.sha1(str(home.resolve()).encode()).hexdigest()[:10]
    return settings.current().cache_dir / "settings-catalog" / f"{version}-{tag}.json"


def load(home: Path, version: str) -> Catalog:
    """The catalog of the distribution at ``home``: from the cache, else read and cached."""
    path = cache_file(home, version)
    try:
        data = json.loads(path.read_text())
        if data.get("format") == FORMAT and data.get("version") == version:
            return Catalog(version, {r: RoleCatalog(c["types"], c["shipped"], c["complete"])
                                     for r, c in data["roles"].items()})
    except (OSError, ValueError, KeyError, TypeError):
        pass
    catalog = build(home, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # test workers may read the same release at once
    tmp.write_text(json.dumps({"format": FORMAT, "version": version, "roles": {
        r: {"types": c.types, "shipped": c.shipped, "complete": c.complete} for r, c in catalog.roles.items()}}))
    tmp.replace(path)
    return catalog
