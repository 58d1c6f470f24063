"""What Prometheus scrapes: one target per node, labelled with the node's cluster, region and role."""

from __future__ import annotations

from dataclasses import dataclass

from pulsarlab.topology import Role, Topology

# where each role serves its Prometheus text page (port kind in the topology, path)
METRICS_ENDPOINT = {
    Role.ZOOKEEPER: ("metrics", "/metrics"),
    Role.BOOKIE: ("http", "/metrics"),
    Role.BROKER: ("web", "/metrics/"),
}
JOB = {Role.ZOOKEEPER: "zookeeper", Role.BOOKIE: "bookie", Role.BROKER: "broker"}


@dataclass(frozen=True)
class ScrapeTarget:
    """One node's metrics endpoint and the labels its series carry."""

    job: str
    node: str
    address: str
    port: int
    path: str
    cluster: str  # "" for a ZooKeeper shared by every cluster
    region: str
    scheme: str = "http"  # https: a secure topology's brokers (their web port speaks TLS only)

    @property
    def instance(self) -> str:
        return f"{self.address}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.instance}{self.path}"


def scrape_targets(topo: Topology) -> list[ScrapeTarget]:
    """Every node of the topology, in topology order."""
    out = []
    for node in topo.nodes:
        kind, path = METRICS_ENDPOINT[node.role]
        out.append(ScrapeTarget(
            job=JOB[node.role], node=node.name, address=topo.address_of(node), port=node.port(kind), path=path,
            cluster=node.cluster or "", region=node.region,
            scheme=topo.http_scheme if node.role is Role.BROKER else "http",
        ))
    return out
