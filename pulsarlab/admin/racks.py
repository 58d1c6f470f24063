"""The rack map written straight into each cluster's metadata store, before any broker starts.

A broker's BookKeeper client reads its own region from the rack map once, when it starts; a
broker started before its rack was set places ledgers as if it were in no region until it is
restarted. Writing the map first (what ``configure`` would write through the admin API, the same
document) lets every broker start knowing its region, so a fresh cluster needs no restart.
"""

from __future__ import annotations

import json

from kazoo.exceptions import KazooException

from pulsarlab.admin import zookeeper
from pulsarlab.admin.commands import rack_document
from pulsarlab.deployment import Endpoints
from pulsarlab.errors import StateError


def write_rack_maps(cluster: Endpoints, touch: bool = False) -> list[str]:
    """Set each cluster's ``<metadata root>/bookies`` to the topology's rack map where it differs;
    returns the clusters written. The metadata initialisation leaves the node there, empty.

    ``touch``: write it even where it holds the same map, so that every running broker re-reads it.
    A broker resolves a bookie's rack when the bookie registers, from a copy of the map it only
    completes for bookies already registered; a bookie that registered before the broker's copy
    knew it is placed in a default region (seen: a fresh topic's ledger with both copies in eu on
    the region-aware sync cluster). A changed map makes each broker resolve every bookie again."""
    topo = cluster.topo
    docs = {c.name: (f"{c.metadata_root}/bookies", rack_document(topo, c.name)) for c in topo.clusters}
    docs = {name: d for name, d in docs.items() if d[1]}
    if not docs:
        return []
    written = []
    with zookeeper.session(topo, "to write the rack map") as zk:
        try:
            for name, (path, doc) in docs.items():
                data = json.dumps(doc, separators=(",", ":")).encode()
                current = zk.get(path)[0] if zk.exists(path) else None
                if not touch and current is not None and current.strip() and json.loads(current) == doc:
                    continue
                if current is None:
                    zk.create(path, data, makepath=True)
                else:
                    zk.set(path, data)
                written.append(name)
        except (KazooException, ValueError) as exc:
            raise StateError(f"writing the rack map into ZooKeeper failed: {exc or type(exc).__name__}") from None
    return written
