"""Server settings from the topology: ``config`` (keys of broker.conf, bookkeeper.conf,
zookeeper.conf) and ``jvm_options`` per role, at three levels.

The top level, a cluster and a node may each hold ``config: {broker: {...}, bookie: {...},
zookeeper: {...}}`` and ``jvm_options: {broker: [...], ...}``; a node's value wins over its
cluster's, which wins over the top level's. What can be checked without the distribution is
checked here (a node's section must be its own role's, a cluster has no ZooKeeper, JVM options
pulsarlab itself sets); the keys and their types are checked against the distribution by
:mod:`pulsarlab.settings_catalog`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from pulsarlab.errors import TopologyError

Scalar = str | bool | int | float
Value = Scalar | list[Scalar]
ROLES = ("broker", "bookie", "zookeeper")


class RoleConfig(BaseModel):
    """Keys of each role's server configuration file, as the topology sets them."""

    model_config = ConfigDict(extra="forbid")

    broker: dict[str, Value] = Field(default_factory=dict)
    bookie: dict[str, Value] = Field(default_factory=dict)
    zookeeper: dict[str, Value] = Field(default_factory=dict)

    def of(self, role: str) -> dict[str, Value]:
        out: dict[str, Value] = getattr(self, role)
        return out


class RoleJvmOptions(BaseModel):
    """JVM options (system properties ``-Dname=value`` and flags) of each role's processes."""

    model_config = ConfigDict(extra="forbid")

    broker: list[str] = Field(default_factory=list)
    bookie: list[str] = Field(default_factory=list)
    zookeeper: list[str] = Field(default_factory=list)

    def of(self, role: str) -> list[str]:
        out: list[str] = getattr(self, role)
        return out


@dataclass(frozen=True)
class Level:
    """One level's settings: ``origin`` as ``render --explain`` says it (``topology``, ``cluster
    NAME``, ``node NAME``), ``field`` its place in the spec (empty at the top level)."""

    origin: str
    field: str
    config: RoleConfig
    jvm_options: RoleJvmOptions

    def at(self, rest: str) -> str:
        """The spec path of ``rest`` (``config.broker.KEY``) at this level (the top level's is bare)."""
        return f"{self.field}.{rest}" if self.field else rest


@dataclass(frozen=True)
class Setting:
    """An effective value and the level it came from."""

    key: str
    value: Value
    origin: str
    field: str

    @property
    def text(self) -> str:
        return conf_text(self.value)


def conf_text(value: Value) -> str:
    """A value as a ``.conf`` file holds it: booleans ``true``/``false``, lists comma-separated."""
    if isinstance(value, list):
        return ",".join(conf_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def effective_config(levels: list[Level], role: str) -> dict[str, Setting]:
    """Each key a role's node gets from ``levels`` (lowest first): the last level setting it wins."""
    out: dict[str, Setting] = {}
    for lv in levels:
        for key, value in lv.config.of(role).items():
            out[key] = Setting(key, value, lv.origin, lv.at(f"config.{role}.{key}"))
    return out


JVM_OPTION = re.compile(r"-(D[^=\s]+|XX:[+-]?[A-Za-z0-9_]+|Xm[sxn]|Xss)")


def jvm_option_key(option: str) -> str:
    """What a JVM option sets, so that a later level's option replaces an earlier one's:
    ``-Dname``, ``-XX:Name`` (``+``/``-``/``=`` alike), ``-Xss``/``-Xmx``/``-Xms``/``-Xmn``; any
    other option (``--add-opens=...``, ``-javaagent:...``, ``-Xlog:...``) is its own whole text,
    since it may be given several times."""
    m = JVM_OPTION.match(option.strip())
    if not m:
        return option.strip()
    key = m.group(1)
    if key.startswith("XX:"):
        key = "XX:" + key[3:].lstrip("+-")
    return "-" + key


def effective_jvm_options(levels: list[Level], role: str) -> dict[str, Setting]:
    """Each JVM option of a role's node, by what it sets (:func:`jvm_option_key`): last level wins."""
    out: dict[str, Setting] = {}
    for lv in levels:
        for i, option in enumerate(lv.jvm_options.of(role)):
            key = jvm_option_key(option)
            out.pop(key, None)  # the winner goes where its level puts it
            out[key] = Setting(key, option, lv.origin, lv.at(f"jvm_options.{role}[{i}]"))
    return out


# JVM options pulsarlab sets itself (runtime/jvm.py, the local runtime's class sharing): where to set them instead
OWNED_JVM_OPTIONS = {
    "-Xmx": "the heap is jvm.<role>_heap_mb",
    "-Xms": "the heap is jvm.<role>_heap_mb",
    "-XX:MaxDirectMemorySize": "direct memory is jvm.<role>_direct_mb",
    "-Dpulsarlab.node": "pulsarlab names each node's JVM with it",
    "-Djdk.net.hosts.file": "pulsarlab gives each broker and bookie its own view of the machine's name",
    "-Dlog4j.configurationFile": "pulsarlab renders each node's log configuration (templates/log4j2.yaml.j2)",
    "-XX:SharedArchiveFile": "class-data sharing is jvm.class_sharing",
    "-XX:ArchiveClassesAtExit": "class-data sharing is jvm.class_sharing",
}
GC_SELECTOR = re.compile(r"-XX:\+Use\w*GC")


def _jvm_problems(field: str, options: list[str]) -> list[TopologyError]:
    problems = []
    for i, option in enumerate(options):
        f = f"{field}[{i}]"
        if not option.startswith("-") or any(c.isspace() for c in option.strip()):
            problems.append(TopologyError(f, f"{option!r} is not one JVM option (one '-...' per list item)"))
        elif (key := jvm_option_key(option)) in OWNED_JVM_OPTIONS:
            problems.append(TopologyError(f, f"{key} is set by pulsarlab: {OWNED_JVM_OPTIONS[key]}"))
        elif GC_SELECTOR.match(option):
            problems.append(TopologyError(f, "pulsarlab selects the serial collector (small heaps, two cores); a "
                                             "second collector would stop the JVM at start"))
    return problems


def level_problems(level: Level, roles: tuple[str, ...], why_not: str) -> list[TopologyError]:
    """What is wrong with one level's sections before any distribution is read: a section for a role
    this level cannot hold (``roles``: the ones it can; ``why_not`` says why), a malformed JVM option,
    an option pulsarlab sets itself, an empty key."""
    problems = []
    for role in ROLES:
        config, jvm = level.config.of(role), level.jvm_options.of(role)
        if role not in roles and (config or jvm):
            section = "config" if config else "jvm_options"
            problems.append(TopologyError(level.at(f"{section}.{role}"), why_not))
            continue
        problems += [TopologyError(level.at(f"config.{role}"), f"{k!r} is not a key") for k in config
                     if not k.strip() or k != k.strip() or "=" in k]
        problems += _jvm_problems(level.at(f"jvm_options.{role}"), jvm)
    return problems


def has_settings(levels: list[Level]) -> bool:
    return any(lv.config.of(r) or lv.jvm_options.of(r) for lv in levels for r in ROLES)


# the parts of a topology that are its nodes' settings, not which deployment it is: a running
# deployment takes a change of them (``up --apply``, pulsarlab.upgrade.rollout)
SETTINGS_FIELDS = ("config", "jvm_options", "jvm")


def without_settings(topology: object) -> object:
    """A dumped topology without its settings at every level, nor its release: what makes it the
    same deployment (a release changes through ``upgrade``, settings through ``up --apply``)."""
    if not isinstance(topology, dict):
        return topology
    out = {k: v for k, v in topology.items() if k not in (*SETTINGS_FIELDS, "pulsar_version")}
    for section in ("clusters", "nodes"):
        if isinstance(out.get(section), list):
            out[section] = [{k: v for k, v in x.items() if k not in SETTINGS_FIELDS} if isinstance(x, dict) else x
                            for x in out[section]]
    return out
