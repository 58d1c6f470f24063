"""The topology model: what a deployment is made of, validated before anything starts.

A topology names its regions, its nodes (ZooKeeper, bookies, brokers), the Pulsar clusters those
nodes form, and the tenants, namespaces and isolation policies the clusters must carry. Every rule
that can be checked without a running cluster is checked here, and a violation raises
:class:`~pulsarlab.errors.TopologyError` naming the field and the rule.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable
from enum import StrEnum
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pulsarlab.errors import TopologyError
from pulsarlab.topology import GRANT_ACTIONS
from pulsarlab.topology.settings import (
    ROLES,
    Level,
    RoleConfig,
    RoleJvmOptions,
    Setting,
    conf_text,
    effective_config,
    level_problems,
)

DEFAULT_PORTS: dict[str, dict[str, int]] = {
    "zookeeper": {"client": 2181, "metrics": 8000},
    "bookie": {"bookie": 3181, "http": 8000},
    "broker": {"service": 6650, "web": 8080},
}
# a TLS broker that also serves plain text (security.plain_text): its plain-text ports, and the
# defaults of its TLS ones (service, web) then, as Pulsar lays them out itself
PLAIN_TEXT_PORTS = {"service_plain": 6650, "web_plain": 8080}
TLS_BESIDE_PLAIN_TEXT = {"service": 6651, "web": 8443}


class Role(StrEnum):
    ZOOKEEPER = "zookeeper"
    BOOKIE = "bookie"
    BROKER = "broker"

    @property
    def start_command(self) -> str:
        """The distribution's ``bin/pulsar`` command (``bin/pulsar-daemon start`` too) that runs a node
        of this role in the foreground: every runtime, the compose files and the playbooks start it."""
        return _START_COMMAND[self]


_START_COMMAND = {Role.ZOOKEEPER: "zookeeper", Role.BOOKIE: "bookie", Role.BROKER: "broker"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class Persistence(_Strict):
    """BookKeeper quorums: every entry goes to ``write_quorum`` of ``ensemble`` bookies and is
    acknowledged once ``ack_quorum`` of them have it."""

    ensemble: int = 2
    write_quorum: int = 2
    ack_quorum: int = 2


class JvmSettings(_Strict):
    """Heap and direct memory per role, in MiB. Small by default: many JVMs share two cores."""

    zookeeper_heap_mb: int = 96
    bookie_heap_mb: int = 160
    bookie_direct_mb: int = 192
    broker_heap_mb: int = 288
    broker_direct_mb: int = 192
    # C1 only: much faster start on a small machine, at some cost in peak throughput.
    fast_start: bool = True
    # Class-data sharing (local runtime): each role's classes archived once per distribution and
    # JDK, then mapped at start (pulsarlab.runtime.cds). Same classes, same behaviour.
    class_sharing: bool = True


class Node(_Strict):
    name: str
    role: Role
    region: str
    cluster: str | None = None
    rack: str | None = None
    address: str | None = None
    ports: dict[str, int] = Field(default_factory=dict)
    # server settings of this node alone (its role's section only): win over its cluster's and the top level's
    config: RoleConfig = Field(default_factory=RoleConfig)
    jvm_options: RoleJvmOptions = Field(default_factory=RoleJvmOptions)

    def port(self, kind: str) -> int:
        if kind in self.ports:
            return self.ports[kind]
        return DEFAULT_PORTS[self.role.value][kind]


class IsolationPolicy(_Strict):
    """A namespace isolation policy: ``primary``/``secondary`` list broker names (or ``"*"``)."""

    name: str
    namespaces: list[str]
    primary: list[str]
    secondary: list[str] = Field(default_factory=list)
    min_limit: int = 1
    usage_threshold: int = 100


class Cluster(_Strict):
    name: str
    placement: Literal["rack", "region"] = "rack"
    read_reordering: bool = False
    persistence: Persistence = Field(default_factory=Persistence)
    metadata_root: str = ""
    isolation: list[IsolationPolicy] = Field(default_factory=list)
    # brokers read past entries no bookie has any more instead of failing (autoSkipNonRecoverableData):
    # data loss made readable, so that a control scenario's read-back can reach the end and count it
    skip_unrecoverable_data: bool = False
    # the bookies' auditor checks every this many seconds that each closed ledger's write quorums span
    # the placement's racks (regions: one rack per region) and has a copy moved where one is missing:
    # what brings ledgers written while a region was down back to a copy per region once it returns
    placement_repair_s: int | None = Field(default=None, gt=0)
    # server settings of this cluster's bookies and brokers: win over the top level's
    config: RoleConfig = Field(default_factory=RoleConfig)
    jvm_options: RoleJvmOptions = Field(default_factory=RoleJvmOptions)


class Tenant(_Strict):
    name: str
    clusters: list[str]


class Namespace(_Strict):
    name: str
    clusters: list[str] | None = None
    persistence: Persistence | None = None
    deduplication: bool | None = None
    # consumers of its topics replicate their subscription's position to the other clusters, so a
    # consumer that fails over to another cluster resumes near where it was (geo-replication only)
    replicated_subscriptions: bool = False
    # role -> actions it may take in the namespace (a secure topology: authorization is on)
    grants: dict[str, list[str]] = Field(default_factory=dict)



# a name that may become one path component (node folders, state folders, logs, run folders) and a
# Pulsar identifier: no separator, no leading dot, so no name can reach outside its parent folder
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ROLE_NAME = SAFE_NAME
# a release as Maven Central names it: 4.0.8, 4.1.0-rc1 (a Maven coordinate, so no separator)
PULSAR_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-.][A-Za-z0-9]+)*")


def name_problem(value: str) -> str | None:
    """Why ``value`` is not a safe name (None: it is)."""
    if SAFE_NAME.fullmatch(value):
        return None
    return f"{value!r} is not a name: letters, digits, _ . - only, starting with a letter or digit"


Authentication = Literal["token", "tls", "basic"]


def _token_only() -> list[Authentication]:
    return ["token"]


class Security(_Strict):
    """The secure profile: JWT authentication, authorization and TLS on the brokers.

    ``token``: ``symmetric`` (one HS256 secret key) or ``rsa`` (RS256: brokers hold the public
    key). ``superusers``: roles with every right; ``broker_role`` (the brokers' own client
    credentials, replication included) and ``admin_role`` (pulsarlab's own calls) must be among
    them. ``workload_role``: the role the workload runs as, granted produce and consume on every
    namespace of the topology. ``tls``: brokers' service and web ports speak TLS only."""

    token: Literal["symmetric", "rsa"] = "symmetric"
    admin_role: str = "admin"
    broker_role: str = "broker"
    workload_role: str = "workload"
    superusers: list[str] = Field(default_factory=lambda: ["admin", "broker"])
    tls: bool = True
    plain_text: bool = False
    # how clients may prove their role: a token (always: pulsarlab and the brokers use one), a TLS
    # client certificate signed by the CA (the role is its common name), a user of htpasswd_file
    authentication: list[Authentication] = Field(default_factory=_token_only)
    # the user's own material instead of generated (paths, relative to the topology file): the CA
    # clients trust, the brokers' certificate (signed by it, naming every broker's address) and
    # key (PEM, not encrypted); the token signing key (symmetric: its raw bytes; rsa: the private
    # key, PEM or DER); basic authentication's users (htpasswd: apr1 or crypt hashes)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token_key_file: str | None = None
    htpasswd_file: str | None = None

    def own_files(self) -> dict[str, str]:
        """The user's files the topology names, by field."""
        return {f: v for f in OWN_FILES if (v := getattr(self, f)) is not None}


OWN_FILES = ("ca_file", "cert_file", "key_file", "token_key_file", "htpasswd_file")


class Topology(_Strict):
    name: str
    description: str = ""
    regions: list[str]
    # nodes get 127.<x>.R.N; another prefix lets two topologies run side by side
    address_prefix: str = "127.0"
    nodes: list[Node]
    clusters: list[Cluster]
    tenants: list[Tenant] = Field(default_factory=list)
    namespaces: list[Namespace] = Field(default_factory=list)
    jvm: JvmSettings = Field(default_factory=JvmSettings)
    # fsync bookie journals and ZooKeeper logs before acknowledging; off trades durability for speed
    fsync: bool = True
    # None: an open cluster (no authentication, plain text)
    security: Security | None = None
    # the Pulsar release every node runs (None: PULSARLAB_PULSAR_VERSION, else pulsarlab's default);
    # `up --pulsar-version` overrides it, `pulsarlab upgrade --to` moves a running deployment
    pulsar_version: str | None = None

    # server settings of every node, per role (topology.settings): clusters and nodes override them
    config: RoleConfig = Field(default_factory=RoleConfig)
    jvm_options: RoleJvmOptions = Field(default_factory=RoleJvmOptions)

    @model_validator(mode="after")
    def fill_plain_text_ports(self) -> Topology:
        """A broker of a topology with plain text beside TLS gets every port of both, explicit:
        what the user set, else Pulsar's own layout."""
        if self.plain_text:
            for n in self.nodes_of(Role.BROKER):
                n.ports = {**TLS_BESIDE_PLAIN_TEXT, **PLAIN_TEXT_PORTS, **n.ports}
        return self

    def settings_levels(self, node: Node) -> list[Level]:
        """Where ``node``'s settings come from, lowest first: the top level, its cluster, itself."""
        levels = [Level("topology", "", self.config, self.jvm_options)]
        if node.cluster is not None:
            ci, c = next((i, c) for i, c in enumerate(self.clusters) if c.name == node.cluster)
            levels.append(Level(f"cluster {c.name}", f"clusters[{ci}]({c.name})", c.config, c.jvm_options))
        ni = self.nodes.index(node)
        levels.append(Level(f"node {node.name}", f"nodes[{ni}]({node.name})", node.config, node.jvm_options))
        return levels

    def runs_auto_recovery(self, node: Node) -> bool:
        """Whether bookie ``node`` runs BookKeeper's auto-recovery daemon (a candidate in the
        auditor's election and a replication worker): the topology's ``autoRecoveryDaemonEnabled``
        for it, else pulsarlab's choice, :meth:`default_auto_recovery`."""
        set_ = self.auto_recovery_setting(node)
        if set_ is not None:
            return conf_text(set_.value).strip().lower() == "true"
        return node in self.default_auto_recovery(node.cluster or "")

    def auto_recovery_setting(self, node: Node) -> Setting | None:
        """The topology's ``autoRecoveryDaemonEnabled`` for bookie ``node`` and where it is set (None: not set)."""
        return effective_config(self.settings_levels(node), Role.BOOKIE.value).get(AUTO_RECOVERY_KEY)

    def runs_stream_storage(self, cluster: str) -> bool:
        """Whether a bookie of ``cluster`` runs BookKeeper's stream storage (the table service that
        Pulsar Functions keep state in), which reads the metadata the cluster's initialisation lays out
        for it; no built-in topology does (``extraServerComponents`` names it)."""
        return any(STREAM_STORAGE_COMPONENT in conf_text(s.value)
                   for b in self.nodes_of(Role.BOOKIE, cluster)
                   if (s := effective_config(self.settings_levels(b), Role.BOOKIE.value).get("extraServerComponents")))

    def default_auto_recovery(self, cluster: str) -> list[Node]:
        """The bookies of ``cluster`` that run auto-recovery unless the topology says otherwise: the
        first of each region (a region lost whole leaves a worker in the others), then the next in
        order until :data:`AUTO_RECOVERY_MIN` do (one bookie lost leaves one). The others skip the
        daemon: its sessions and election cost each bookie about 2 % of a core, and a bookie that
        lost the election takes 10 s longer to stop (docs/fast-start.md)."""
        bookies = self.nodes_of(Role.BOOKIE, cluster)
        firsts = [b for i, b in enumerate(bookies) if all(o.region != b.region for o in bookies[:i])]
        more = [b for b in bookies if b not in firsts][:max(0, AUTO_RECOVERY_MIN - len(firsts))]
        return [b for b in bookies if b in firsts or b in more]

    def first_bookie(self, cluster: str) -> Node:
        """The bookie of ``cluster`` started alone on a fresh cluster: the first that runs
        auto-recovery, whose daemon lays out its metadata (``underreplication/LAYOUT``), which
        several daemons starting together race to create (the losers exit with BadVersion)."""
        bookies = self.nodes_of(Role.BOOKIE, cluster)
        return next((b for b in bookies if self.runs_auto_recovery(b)), bookies[0])

    # ----- derived views -------------------------------------------------------------------
    def nodes_of(self, role: Role, cluster: str | None = None) -> list[Node]:
        return [n for n in self.nodes if n.role == role and (cluster is None or n.cluster == cluster)]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def cluster(self, name: str) -> Cluster:
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)

    def address_of(self, node: Node) -> str:
        """The node's loopback address: explicit, or 127.0.R.N (R per region, N per node in it)."""
        if node.address:
            return node.address
        r = self.regions.index(node.region) + 1
        same_region = [n for n in self.nodes if n.region == node.region and not n.address]
        return f"{self.address_prefix}.{r}.{same_region.index(node) + 1}"

    def rack_of(self, node: Node) -> str | None:
        """The rack a bookie or broker belongs to, ``region/rack`` as region-aware placement wants."""
        if node.rack:
            return node.rack
        if node.cluster and self.cluster(node.cluster).placement == "region":
            return f"{node.region}/1"
        return None

    def zookeeper_connect(self) -> str:
        return ",".join(f"{self.address_of(z)}:{z.port('client')}" for z in self.nodes_of(Role.ZOOKEEPER))

    def metadata_store_url(self, cluster: str) -> str:
        return f"zk:{self.zookeeper_connect()}{self.cluster(cluster).metadata_root}"

    def configuration_store_url(self) -> str:
        return f"zk:{self.zookeeper_connect()}"

    @property
    def tls(self) -> bool:
        """Brokers speak TLS on their ``service`` and ``web`` ports (plain text is off, or on ports of
        its own: :attr:`plain_text`)."""
        return self.security is not None and self.security.tls

    @property
    def plain_text(self) -> bool:
        """Brokers speak TLS on their ``service`` and ``web`` ports and plain text on ``service_plain`` and ``web_plain``."""
        return self.tls and self.security is not None and self.security.plain_text

    def port_kinds(self, node: Node) -> list[str]:
        """The ports ``node`` binds, by kind."""
        kinds = list(DEFAULT_PORTS[node.role.value])
        if node.role == Role.BROKER and self.plain_text:
            kinds += list(PLAIN_TEXT_PORTS)
        return kinds

    def plain_service_url(self, cluster: str) -> str | None:
        """The plain-text ``pulsar://`` URL of a cluster whose brokers serve plain text beside TLS (else None)."""
        if not self.plain_text:
            return None
        hosts = ",".join(f"{self.address_of(b)}:{b.port('service_plain')}" for b in self.nodes_of(Role.BROKER, cluster))
        return f"pulsar://{hosts}"

    def plain_web_url(self, cluster: str) -> str | None:
        """The plain-text ``http://`` URLs of a cluster's brokers (comma-separated) when they serve plain text beside TLS."""
        if not self.plain_text:
            return None
        return ",".join(f"http://{self.address_of(b)}:{b.port('web_plain')}" for b in self.nodes_of(Role.BROKER, cluster))

    @property
    def http_scheme(self) -> str:
        return "https" if self.tls else "http"

    def broker_web_url(self, node: Node) -> str:
        return f"{self.http_scheme}://{self.address_of(node)}:{node.port('web')}"

    def web_url(self, cluster: str) -> str:
        return ",".join(self.broker_web_url(b) for b in self.nodes_of(Role.BROKER, cluster))

    def registered_web_url(self, cluster: str) -> str:
        """The web URL a cluster is registered under in the configuration store, in Pulsar's
        multi-host form ``http://a:8080,b:8080``: other clusters' brokers build their admin client
        (topic creation for replication) from it, and that client parses only this form."""
        hosts = ",".join(f"{self.address_of(b)}:{b.port('web')}" for b in self.nodes_of(Role.BROKER, cluster))
        return f"{self.http_scheme}://{hosts}"

    def service_url(self, cluster: str) -> str:
        hosts = ",".join(f"{self.address_of(b)}:{b.port('service')}" for b in self.nodes_of(Role.BROKER, cluster))
        return f"{'pulsar+ssl' if self.tls else 'pulsar'}://{hosts}"

    def endpoints(self) -> list[tuple[Node, str, int]]:
        """Every (node, address, port) this topology binds."""
        out = []
        for n in self.nodes:
            addr = self.address_of(n)
            for kind in self.port_kinds(n):
                out.append((n, addr, n.port(kind)))
        return out


def parse(data: dict[str, Any], loopback: bool = True) -> Topology:
    """Build and validate a topology from plain data (a parsed YAML file); ``loopback=False`` for
    nodes on hosts of their own (an Ansible inventory), whose addresses are not this machine's."""
    try:
        topo = Topology.model_validate(data)
    except ValidationError as exc:
        raise TopologyError.of([TopologyError(".".join(str(p) for p in err["loc"]) or "<root>", err["msg"])
                                for err in exc.errors()]) from None
    validate(topo, loopback)
    return topo


def _check_persistence(field: str, p: Persistence, bookies: int, regions: int, placement: str) -> None:
    if p.ack_quorum < 1:
        raise TopologyError(f"{field}.ack_quorum", f"must be >= 1 (got {p.ack_quorum})")
    if p.write_quorum < p.ack_quorum:
        raise TopologyError(
            f"{field}.write_quorum",
            f"must be >= ack_quorum (write_quorum={p.write_quorum} < ack_quorum={p.ack_quorum})",
        )
    if p.ensemble < p.write_quorum:
        raise TopologyError(
            f"{field}.ensemble", f"must be >= write_quorum (ensemble={p.ensemble} < write_quorum={p.write_quorum})"
        )
    if p.write_quorum > bookies:
        raise TopologyError(
            f"{field}.write_quorum", f"write_quorum={p.write_quorum} is larger than the {bookies} bookies of the cluster"
        )
    if p.ensemble > bookies:
        raise TopologyError(
            f"{field}.ensemble", f"ensemble={p.ensemble} is larger than the {bookies} bookies of the cluster"
        )
    if placement == "region" and p.write_quorum < regions:
        raise TopologyError(
            f"{field}.write_quorum",
            f"region-aware placement over {regions} regions needs write_quorum >= {regions} so every entry "
            f"has a copy in each region (got {p.write_quorum})",
        )


def _check_security(s: Security) -> None:
    for field in ("admin_role", "broker_role", "workload_role"):
        if not ROLE_NAME.fullmatch(getattr(s, field)):
            raise TopologyError(f"security.{field}", f"not a role name: {getattr(s, field)!r} (letters, digits, _ . -)")
    for i, r in enumerate(s.superusers):
        if not ROLE_NAME.fullmatch(r):
            raise TopologyError(f"security.superusers[{i}]", f"not a role name: {r!r} (letters, digits, _ . -)")
    for field in ("admin_role", "broker_role"):
        if getattr(s, field) not in s.superusers:
            raise TopologyError(
                "security.superusers",
                f"{field} {getattr(s, field)!r} must be a superuser (pulsarlab and the brokers act as it)",
            )
    if s.workload_role in s.superusers:
        raise TopologyError("security.workload_role", f"{s.workload_role!r} is a superuser: the workload role must not be")
    if "token" not in s.authentication:
        raise TopologyError("security.authentication", "must include token: pulsarlab and the brokers authenticate with tokens")
    if _dupes(list(s.authentication)):
        raise TopologyError("security.authentication", f"{', '.join(_dupes(list(s.authentication)))} named twice")
    if "tls" in s.authentication and not s.tls:
        raise TopologyError("security.authentication", "tls (client certificates) needs tls: true")
    if ("basic" in s.authentication) != (s.htpasswd_file is not None):
        raise TopologyError("security.htpasswd_file", "basic authentication and htpasswd_file go together: name both or neither")
    tls_files = [f for f in ("ca_file", "cert_file", "key_file") if getattr(s, f) is not None]
    if tls_files and len(tls_files) != 3:
        raise TopologyError(f"security.{tls_files[0]}", "ca_file, cert_file and key_file go together: name all three or none")
    if s.plain_text and not s.tls:
        raise TopologyError("security.plain_text", "plain text beside TLS needs tls: true (without it every port is plain text)")
    if tls_files and not s.tls:
        raise TopologyError("security.ca_file", "certificates are for TLS: set tls: true or leave them out")


def _dupes(names: list[str]) -> list[str]:
    return [n for n, c in Counter(names).items() if c > 1]


def validate(t: Topology, loopback: bool = True) -> None:
    """Check every cross-field rule; raise one TopologyError naming every violation found (each
    node, cluster, tenant and namespace is checked on its own). ``loopback``: every node on
    127.0.0.0/8 (one machine's runtimes)."""
    _check_basics(t)  # what the other checks rely on (names, at least one cluster...): alone, first
    clusters = {c.name for c in t.clusters}
    tenants = {x.name: x for x in t.tenants}
    checks: list[Callable[[], None]] = [
        *(partial(_check_node, t, f"nodes[{i}]({n.name})", n, clusters, loopback) for i, n in enumerate(t.nodes)),
        partial(_check_port_clashes, t),
        *(partial(_check_cluster, t, f"clusters[{ci}]({c.name})", c) for ci, c in enumerate(t.clusters)),
        *(partial(_check_tenant, f"tenants[{ti}]({x.name}).clusters", x, clusters) for ti, x in enumerate(t.tenants)),
        *(partial(_check_namespace, t, f"namespaces[{ni}]({ns.name})", ns, tenants) for ni, ns in enumerate(t.namespaces)),
        partial(_check_settings, t),
    ]
    problems: list[TopologyError] = []
    for check in checks:
        try:
            check()
        except TopologyError as exc:
            problems.append(exc)
        except (KeyError, ValueError, AttributeError):
            if not problems:
                raise
            # this check tripped over a problem already found (an unknown region has no addresses):
            # the others still run
    if problems:
        raise TopologyError.of(problems)


def _check_settings(t: Topology) -> None:
    """The settings sections' shape (keys and types are the distribution's: settings_catalog)."""
    problems = level_problems(Level("topology", "", t.config, t.jvm_options), ROLES, "")
    for ci, c in enumerate(t.clusters):
        problems += level_problems(Level("", f"clusters[{ci}]({c.name})", c.config, c.jvm_options), ROLES[:2],
                                   "ZooKeeper serves every cluster: set its settings at the top level or on its node")
    for ni, n in enumerate(t.nodes):
        problems += level_problems(Level("", f"nodes[{ni}]({n.name})", n.config, n.jvm_options), (n.role.value,),
                                   f"{n.name} is a {n.role.value}: only its own role's section applies")
    if problems:
        raise TopologyError.of(problems)


def _check_names(t: Topology) -> None:
    """Names that become folders and identifiers: the topology's, its nodes', clusters', regions',
    tenants' and each part of its namespaces'."""
    named = [("name", t.name), *((f"regions[{i}]", r) for i, r in enumerate(t.regions)),
             *((f"nodes[{i}].name", n.name) for i, n in enumerate(t.nodes)),
             *((f"clusters[{i}].name", c.name) for i, c in enumerate(t.clusters)),
             *((f"tenants[{i}].name", x.name) for i, x in enumerate(t.tenants))]
    for i, ns in enumerate(t.namespaces):
        parts = ns.name.split("/")
        if len(parts) != 2:
            raise TopologyError(f"namespaces[{i}].name", f"{ns.name!r} is not TENANT/NAMESPACE")
        named += [(f"namespaces[{i}].name", part) for part in parts]
    if problems := [TopologyError(field, why) for field, value in named if (why := name_problem(value))]:
        raise TopologyError.of(problems)


def _check_basics(t: Topology) -> None:
    _check_names(t)
    for field, names in (
        ("regions", t.regions),
        ("nodes", [n.name for n in t.nodes]),
        ("clusters", [c.name for c in t.clusters]),
        ("tenants", [x.name for x in t.tenants]),
        ("namespaces", [x.name for x in t.namespaces]),
    ):
        if d := _dupes(names):
            raise TopologyError(field, f"duplicate name {d[0]!r}")
    if t.pulsar_version is not None and not PULSAR_VERSION.fullmatch(t.pulsar_version):
        raise TopologyError("pulsar_version", f"{t.pulsar_version!r} is not a Pulsar release such as 4.0.8")
    if not re.fullmatch(r"127\.\d{1,3}", t.address_prefix) or int(t.address_prefix.split(".")[1]) > 255:
        raise TopologyError("address_prefix", f"must be '127.<0-255>' (got {t.address_prefix!r})")
    if not t.regions:
        raise TopologyError("regions", "at least one region is needed")
    if t.security is not None:
        _check_security(t.security)
    if not t.clusters:
        raise TopologyError("clusters", "at least one cluster is needed")
    if not t.nodes_of(Role.ZOOKEEPER):
        raise TopologyError("nodes", "at least one zookeeper node is needed")


def _check_node(t: Topology, f: str, n: Node, clusters: set[str], loopback: bool) -> None:
    if n.region not in t.regions:
        raise TopologyError(f"{f}.region", f"unknown region {n.region!r} (regions: {', '.join(t.regions)})")
    if n.role == Role.ZOOKEEPER:
        if n.cluster is not None:
            raise TopologyError(f"{f}.cluster", "a zookeeper node serves every cluster; leave cluster unset")
    elif n.cluster not in clusters:
        raise TopologyError(f"{f}.cluster", f"unknown cluster {n.cluster!r} (clusters: {', '.join(sorted(clusters))})")
    kinds = t.port_kinds(n)
    for kind in n.ports:
        if kind not in kinds:
            also = f" ({' and '.join(PLAIN_TEXT_PORTS)} with security.plain_text)" if n.role == Role.BROKER else ""
            raise TopologyError(f"{f}.ports.{kind}", f"a {n.role.value} has ports {sorted(kinds)}{also}")
    for kind in kinds:
        if not 1 <= n.port(kind) <= 65535:
            raise TopologyError(f"{f}.ports.{kind}", f"port {n.port(kind)} out of range 1..65535")
    try:
        ip = ipaddress.ip_address(t.address_of(n))
    except ValueError:
        raise TopologyError(f"{f}.address", f"not an IP address: {n.address!r}") from None
    if loopback and not ip.is_loopback:
        raise TopologyError(f"{f}.address", f"{ip} is not a loopback address; nodes run on 127.0.0.0/8")
    if n.rack is not None and n.role == Role.ZOOKEEPER:
        raise TopologyError(f"{f}.rack", "racks apply to bookies and brokers only")


def _check_port_clashes(t: Topology) -> None:
    seen: dict[tuple[str, int], str] = {}
    for n, addr, port in t.endpoints():
        if (addr, port) in seen:
            other = seen[(addr, port)]
            raise TopologyError(f"nodes({n.name}).ports", f"{addr}:{port} clashes with "
                                + ("another of its own ports" if other == n.name else f"node {other}"))
        seen[(addr, port)] = n.name


def _check_cluster(t: Topology, f: str, c: Cluster) -> None:
    bookies = t.nodes_of(Role.BOOKIE, c.name)
    brokers = t.nodes_of(Role.BROKER, c.name)
    if not bookies:
        raise TopologyError(f, "a cluster needs at least one bookie")
    if not brokers:
        raise TopologyError(f, "a cluster needs at least one broker")
    if c.metadata_root and not c.metadata_root.startswith("/"):
        raise TopologyError(f"{f}.metadata_root", "must start with '/'")
    if c.placement == "region":
        for b in bookies + brokers:
            rack = t.rack_of(b) or ""
            parts = rack.strip("/").split("/")
            if len(parts) != 2 or parts[0] != b.region:
                raise TopologyError(
                    f"nodes({b.name}).rack",
                    "region-aware placement needs racks named '<region>/<rack>' starting with "
                    f"the node's region {b.region!r} (got {rack!r})",
                )
    _check_persistence(f"{f}.persistence", c.persistence, len(bookies), len({b.region for b in bookies}), c.placement)
    _check_auto_recovery(t, f, c.name, bookies)
    if c.placement_repair_s is not None:
        _check_placement_repair(t, f, c, bookies)
    namespaces = {x.name for x in t.namespaces}
    for pi, p in enumerate(c.isolation):
        _check_isolation(f"{f}.isolation[{pi}]({p.name})", p, c.name, {b.name for b in brokers}, namespaces)


# bookie keys that clusters[].placement_repair_s renders (templates/bookkeeper.conf.j2)
PLACEMENT_REPAIR_KEYS = ("auditorPeriodicPlacementPolicyCheckInterval", "repairedPlacementPolicyNotAdheringBookieEnabled",
                         "minNumRacksPerWriteQuorum", "enforceMinNumRacksPerWriteQuorum")


def _check_placement_repair(t: Topology, f: str, c: Cluster, bookies: list[Node]) -> None:
    """BookKeeper checks a ledger's placement by racks only (its region-aware policy reports every
    ledger as placed well), so in region placement each region must be one rack: then "two racks per
    write quorum" means "both regions"; and the keys it renders are its alone."""
    if c.placement == "region":
        racks: dict[str, set[str]] = {}
        for b in bookies:
            racks.setdefault(b.region, set()).add(t.rack_of(b) or "")
        if split := {r: sorted(x) for r, x in racks.items() if len(x) > 1}:
            region, names = next(iter(split.items()))
            raise TopologyError(f"{f}.placement_repair_s",
                                f"needs the bookies of each region in one rack (BookKeeper checks placement by racks); "
                                f"region {region!r} has racks {', '.join(names)}")
    levels = [("config.bookie", t.config), (f"{f}.config.bookie", c.config),
              *((f"nodes({b.name}).config.bookie", b.config) for b in bookies)]
    for where, config in levels:
        if clash := sorted(set(config.of("bookie")) & set(PLACEMENT_REPAIR_KEYS)):
            raise TopologyError(where, f"{clash[0]} is set by {f}.placement_repair_s (the auditor's placement check and repair)")


# the bookie key that turns BookKeeper's auto-recovery daemon on (Topology.runs_auto_recovery)
AUTO_RECOVERY_KEY = "autoRecoveryDaemonEnabled"
STREAM_STORAGE_COMPONENT = "StreamStorageLifecycleComponent"
# bookies per cluster that run it by default (Topology.default_auto_recovery), where there are as many
AUTO_RECOVERY_MIN = 2


def _check_auto_recovery(t: Topology, f: str, cluster: str, bookies: list[Node]) -> None:
    """A cluster with no bookie running auto-recovery would never copy a lost bookie's ledgers
    again, and the gates that wait for no under-replicated ledger would pass without anyone checking."""
    if not any(t.runs_auto_recovery(b) for b in bookies):
        where = {s.field for b in bookies if (s := t.auto_recovery_setting(b))}
        raise TopologyError(where.pop() if len(where) == 1 else f"{f}.config.bookie.{AUTO_RECOVERY_KEY}",
                            f"no bookie of cluster {cluster} runs auto-recovery ({AUTO_RECOVERY_KEY} is false on each): "
                            "a lost bookie's ledgers would never be copied again; leave it true on one bookie at least")


def _check_isolation(pf: str, p: IsolationPolicy, cluster: str, brokers: set[str], namespaces: set[str]) -> None:
    for ns in p.namespaces:
        if ns not in namespaces:
            raise TopologyError(f"{pf}.namespaces", f"unknown namespace {ns!r}")
    if not p.primary:
        raise TopologyError(f"{pf}.primary", "at least one primary broker is needed")
    for side in ("primary", "secondary"):
        for b in getattr(p, side):
            if b != "*" and b not in brokers:
                raise TopologyError(f"{pf}.{side}", f"{b!r} is not a broker of cluster {cluster}")
    if p.min_limit < 0:
        raise TopologyError(f"{pf}.min_limit", "must be >= 0")
    if not 0 <= p.usage_threshold <= 100:
        raise TopologyError(f"{pf}.usage_threshold", "must be a percentage 0..100")


def _check_tenant(f: str, x: Tenant, clusters: set[str]) -> None:
    if not x.clusters:
        raise TopologyError(f, "a tenant needs at least one cluster")
    for c in x.clusters:
        if c not in clusters:
            raise TopologyError(f, f"unknown cluster {c!r}")


def _check_namespace(t: Topology, f: str, ns: Namespace, tenants: dict[str, Tenant]) -> None:
    if ns.name.count("/") != 1:
        raise TopologyError(f"{f}.name", "a namespace is named '<tenant>/<namespace>'")
    tenant = ns.name.split("/")[0]
    if tenant not in tenants:
        raise TopologyError(f"{f}.name", f"unknown tenant {tenant!r}")
    if ns.clusters == []:
        raise TopologyError(f"{f}.clusters", "a namespace needs at least one cluster (omit it for the tenant's)")
    for c in namespace_clusters(t, ns):
        if c not in {x.name for x in t.clusters}:
            raise TopologyError(f"{f}.clusters", f"unknown cluster {c!r}")
        if c not in tenants[tenant].clusters:
            raise TopologyError(f"{f}.clusters", f"cluster {c!r} is not allowed for tenant {tenant!r}")
        if ns.persistence:
            bookies = t.nodes_of(Role.BOOKIE, c)
            _check_persistence(
                f"{f}.persistence", ns.persistence, len(bookies), len({b.region for b in bookies}), t.cluster(c).placement
            )
    if ns.replicated_subscriptions and len(namespace_clusters(t, ns)) < 2:
        raise TopologyError(f"{f}.replicated_subscriptions", "needs a namespace replicated to two clusters or more")
    for role, actions in ns.grants.items():
        if problem := name_problem(role):
            raise TopologyError(f"{f}.grants", f"role {problem}")
        bad = [a for a in actions if a not in GRANT_ACTIONS]
        if not actions or bad or len(set(actions)) != len(actions):
            raise TopologyError(f"{f}.grants.{role}", f"{actions!r}: a list of distinct actions among {', '.join(GRANT_ACTIONS)}")


def namespace_clusters(t: Topology, ns: Namespace) -> list[str]:
    """The clusters a namespace lives on: explicit, or every cluster its tenant is allowed on."""
    if ns.clusters is not None:
        return ns.clusters
    tenant = ns.name.split("/")[0]
    for x in t.tenants:
        if x.name == tenant:
            return x.clusters
    return []
