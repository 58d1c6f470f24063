"""A topology's ``config`` sections checked against a release's catalog: every problem at once.

A broker key must be one the release knows (:mod:`pulsarlab.settings_catalog.catalog`); an unknown
one is an error naming the nearest known keys. BookKeeper and ZooKeeper read keys no class names
(plugins, system properties): an unknown one there is a warning, by name, and the key is still
rendered. A value must fit the field's Java type where the class tells it. Keys pulsarlab decides
itself from the topology (``templates/``) are refused with the place to say them instead.
"""

from __future__ import annotations

import difflib
import re

from pulsarlab.errors import TopologyError
from pulsarlab.settings_catalog.catalog import Catalog
from pulsarlab.topology import Topology
from pulsarlab.topology.settings import ROLES, Level, Value

_ADDRESS = "pulsarlab gives every node its address (nodes[].address, address_prefix)"
_PORT = "ports are nodes[].ports"
_METADATA = "pulsarlab points every node at the topology's ZooKeeper (metadata_root per cluster)"
_RACKS = "rack-awareness follows clusters[].placement and nodes[].rack"
_QUORUM = "quorums are clusters[].persistence (namespaces[].persistence per namespace)"
_SECURE = "the secure profile (security:) sets it, with the files pulsarlab makes"
_DISKS = "pulsarlab keeps each node's data in its own folder"
_FSYNC = "fsync: at the top level decides it"
_BROKER: dict[str, str] = {
    "clusterName": "the cluster's name is clusters[].name",
    **dict.fromkeys(("metadataStoreUrl", "configurationMetadataStoreUrl", "bookkeeperMetadataServiceUri",
                     "zookeeperServers", "configurationStoreServers", "globalZookeeperServers"), _METADATA),
    **dict.fromkeys(("bindAddress", "advertisedAddress", "bindAddresses", "advertisedListeners",
                     "internalListenerName"), _ADDRESS),
    **dict.fromkeys(("brokerServicePort", "webServicePort", "brokerServicePortTls", "webServicePortTls"), _PORT),
    **dict.fromkeys(("tlsCertificateFilePath", "tlsKeyFilePath", "tlsTrustCertsFilePath", "brokerClientTlsEnabled",
                     "brokerClientTrustCertsFilePath", "authenticationEnabled", "authenticationProviders",
                     "tokenSecretKey", "tokenPublicKey", "authorizationEnabled", "superUserRoles",
                     "brokerClientAuthenticationPlugin", "brokerClientAuthenticationParameters",
                     "anonymousUserRole", "basicAuthConf"), _SECURE),
    **dict.fromkeys(("managedLedgerDefaultEnsembleSize", "managedLedgerDefaultWriteQuorum",
                     "managedLedgerDefaultAckQuorum"), _QUORUM),
    **dict.fromkeys(("bookkeeperClientRackawarePolicyEnabled", "bookkeeperClientRegionawarePolicyEnabled",
                     "bookkeeperClientMinNumRacksPerWriteQuorum", "bookkeeperClientEnforceMinNumRacksPerWriteQuorum"),
                    _RACKS),
    "bookkeeperClientReorderReadSequenceEnabled": "clusters[].read_reordering decides it",
    "autoSkipNonRecoverableData": "clusters[].skip_unrecoverable_data decides it",
}
_BOOKIE: dict[str, str] = {
    "bookiePort": _PORT, "httpServerPort": _PORT,
    **dict.fromkeys(("advertisedAddress", "listeningInterface", "allowLoopback", "useHostNameAsBookieID",
                     "httpServerHost", "bookieId"), _ADDRESS),
    **dict.fromkeys(("journalDirectories", "journalDirectory", "ledgerDirectories", "indexDirectories"), _DISKS),
    **dict.fromkeys(("metadataServiceUri", "zkServers", "zkLedgersRootPath"), _METADATA),
    **dict.fromkeys(("ensemblePlacementPolicy", "reppDnsResolverClass"), _RACKS),
    "journalSyncData": _FSYNC,
    "httpServerEnabled": "pulsarlab knows a bookie is ready, and reads its state, through its HTTP server",
}
_ZOOKEEPER: dict[str, str] = {
    **dict.fromkeys(("dataDir", "dataLogDir"), _DISKS),
    **dict.fromkeys(("clientPort", "metricsProvider.httpPort"), _PORT),
    **dict.fromkeys(("clientPortAddress", "metricsProvider.httpHost"), _ADDRESS),
    "admin.enableServer": "pulsarlab turns ZooKeeper's admin server off (it would take port 8080 of every address)",
    "forceSync": _FSYNC,
}
OWNED: dict[str, dict[str, str]] = {"broker": _BROKER, "bookie": _BOOKIE, "zookeeper": _ZOOKEEPER}
SERVER_ENTRY = re.compile(r"server\.\d+")  # a ZooKeeper ensemble member: the topology's zookeeper nodes


def nearest(key: str, known: list[str]) -> list[str]:
    """The known keys nearest ``key`` (one differing only in case first)."""
    same = [k for k in known if k.lower() == key.lower()]
    return same or difflib.get_close_matches(key, known, n=3, cutoff=0.6)


def type_problem(value: Value, kind: str | None) -> str | None:
    """Why ``value`` cannot be a field of Java type ``kind`` (None: it can, or nothing tells)."""
    if kind is None:
        return None
    if isinstance(value, list):
        # a text field may hold a comma-separated list (rendered so)
        return None if kind in ("list", "text") else f"a list, but the field is a single {kind}"
    text = str(value).strip()
    if kind == "boolean":
        ok = isinstance(value, bool) or text.lower() in ("true", "false")
    elif kind == "integer":
        ok = not isinstance(value, bool) and re.fullmatch(r"[+-]?\d+", text) is not None
    elif kind == "number":
        ok = not isinstance(value, bool) and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text) is not None
    else:
        ok = True
    return None if ok else f"{value!r} is not {'an' if kind == 'integer' else 'a'} {kind}"


def all_levels(topo: Topology) -> list[Level]:
    levels = [Level("topology", "", topo.config, topo.jvm_options)]
    levels += [Level(f"cluster {c.name}", f"clusters[{i}]({c.name})", c.config, c.jvm_options)
               for i, c in enumerate(topo.clusters)]
    levels += [Level(f"node {n.name}", f"nodes[{i}]({n.name})", n.config, n.jvm_options) for i, n in enumerate(topo.nodes)]
    return levels


def check(topo: Topology, catalog: Catalog) -> tuple[list[TopologyError], list[str]]:
    """Every key and value the release refuses, and the warnings (keys BookKeeper or ZooKeeper
    may read that nothing in the release names)."""
    problems: list[TopologyError] = []
    warnings: list[str] = []
    for level in all_levels(topo):
        for role in ROLES:
            rc = catalog.roles[role]
            known = sorted(rc.types)
            for key, value in level.config.of(role).items():
                field = level.at(f"config.{role}.{key}")
                if key in OWNED[role] or (role == "zookeeper" and SERVER_ENTRY.fullmatch(key)):
                    why = OWNED[role].get(key, "the ensemble is the topology's zookeeper nodes")
                    problems.append(TopologyError(field, f"set by pulsarlab: {why}"))
                elif key not in rc.types:
                    near = nearest(key, known)
                    hint = f"; did you mean {', '.join(near)}?" if near else ""
                    if rc.complete:
                        problems.append(TopologyError(field, f"Pulsar {catalog.version} has no {role} setting {key!r}{hint}"))
                    else:
                        warnings.append(f"{field}: neither the shipped {role} configuration nor its classes name {key!r} "
                                        f"(Pulsar {catalog.version}); rendered as given{hint}")
                elif wrong := type_problem(value, rc.types[key]):
                    problems.append(TopologyError(field, wrong))
    return problems, warnings
