"""Outages of whole places and of disks: ``region-loss R``, ``power-loss``, ``disk-loss BOOKIE``.

* ``region-loss R``: every node of region ``R`` killed (SIGKILL) at the same moment.
* ``power-loss``: every node killed at the same moment, then all started again (ZooKeeper, then
  bookies, then brokers) and awaited. What an acknowledged write survives depends on fsync: bookies
  run with ``journalSyncData=true`` and ZooKeeper with ``forceSync=yes`` unless the topology says
  ``fsync: false`` (then the record says so).
* ``disk-loss BOOKIE``: the bookie killed, its data directory removed, its cookie removed from the
  metadata store (a bookie with empty disks and a registered cookie refuses to start, as BookKeeper
  guards against exactly this), then started again: an empty bookie under the same id.
"""

from __future__ import annotations

from kazoo.exceptions import KazooException, NoNodeError

from pulsarlab.admin import zookeeper
from pulsarlab.chaos import targets
from pulsarlab.chaos.actions import Done, register
from pulsarlab.chaos.nodes import any_targets, no_args, stopped_at
from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.errors import StateError
from pulsarlab.topology import Role, bookie_id


def region_nodes(cluster: Endpoints, region: str) -> list[str]:
    return [n.name for n in cluster.topo.nodes if n.region == region]


def _one_region(cluster: Endpoints, args: tuple[str, ...]) -> None:
    if len(args) != 1:
        raise ValueError("needs exactly one region")
    targets.check(cluster.topo, targets.Target("region", args[0]))


def region_loss(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Kill every node of the region at once."""
    names = region_nodes(cluster, args[0])
    at = stopped_at(cluster, names, kill=True)
    return Done(f"region {args[0]} lost: killed {', '.join(names)} at once", tuple(names), at)


def power_loss(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Kill every node at once, then start them all and wait until they are ready."""
    names = [n.name for n in cluster.topo.nodes]
    at = stopped_at(cluster, names, kill=True)
    result = cluster.up()
    sync = "journal fsync on" if cluster.topo.fsync else "fsync OFF (topology fsync: false): acknowledged writes may be lost"
    return Done(f"power loss: killed all {len(names)} nodes at once, started {len(result.started)} again "
                f"in {result.seconds:.1f}s ({sync})", tuple(names), at)


def cookie_path(cluster: Endpoints, bookie: str) -> str:
    """Where a bookie's cookie lives in the metadata store (``<root>/ledgers/cookies/<bookie id>``)."""
    topo = cluster.topo
    node = topo.node(bookie)
    root = topo.cluster(node.cluster).metadata_root if node.cluster else ""
    return f"{root}/ledgers/cookies/{bookie_id(topo, node)}"


def delete_cookie(cluster: Endpoints, bookie: str) -> bool:
    """Remove a bookie's cookie from ZooKeeper; False if there was none."""
    with zookeeper.session(cluster.topo, f"to remove the cookie of {bookie}") as zk:
        try:
            zk.delete(cookie_path(cluster, bookie))
            return True
        except NoNodeError:
            return False
        except KazooException as exc:
            raise StateError(f"removing the cookie of {bookie} at {cookie_path(cluster, bookie)}: {exc!r}") from None


def disk_loss(cluster: NodeControl, args: tuple[str, ...]) -> Done:
    """Kill the bookie, remove its data and its cookie, start it again empty."""
    names = targets.resolve_all(cluster, args)
    for name in names:
        if cluster.topo.node(name).role != Role.BOOKIE:
            raise StateError(f"disk-loss: {name} is not a bookie")
    at = stopped_at(cluster, names, kill=True)
    for name in names:
        cluster.wipe_node_data(name)
        delete_cookie(cluster, name)
    cluster.start_group(names)
    return Done(f"disk lost: {targets.describe(args, names)} killed, data and cookie removed, started again empty",
                tuple(names), at)


register("region-loss", region_loss, _one_region)
register("power-loss", power_loss, no_args)
register("disk-loss", disk_loss, any_targets(Role.BOOKIE))
