"""Topic actions: ``unload TOPIC``.

* ``unload TOPIC``: the owning broker closes the topic (its current ledger is closed) and the
  topic is loaded again on a new ledger, by the same or another broker. A scenario uses it to put
  a ledger it damaged behind the topic's current one: Pulsar can skip a ledger no bookie holds any
  more (``autoSkipNonRecoverableData``) only when a next ledger exists to move the reader to.
"""

from __future__ import annotations

from pulsarlab.admin.client import admin_of
from pulsarlab.chaos import targets
from pulsarlab.chaos.actions import Done, register
from pulsarlab.deployment import Endpoints
from pulsarlab.topology import topic_cluster


def _one_topic(cluster: Endpoints, args: tuple[str, ...]) -> None:
    if len(args) != 1:
        raise ValueError("needs exactly one topic")
    targets.check_topic_syntax(args[0])
    topic_cluster(cluster.topo, args[0])


def unload(cluster: Endpoints, args: tuple[str, ...]) -> Done:
    """Unload the topic over the admin REST API of its cluster, with the deployment's admin credentials."""
    topic = args[0]
    admin_of(cluster, topic_cluster(cluster.topo, topic)).unload_topic(topic)
    return Done(f"unloaded {topic}: its current ledger closed, the topic loaded again on a new one")


register("unload", unload, _one_topic)
