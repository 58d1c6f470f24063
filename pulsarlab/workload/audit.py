"""The audit subscription: what keeps a run's messages stored until the storage view has read them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pulsar

from pulsarlab.security import ClientAuth
from pulsarlab.security import client as pulsar_client


@contextlib.contextmanager
def audit_subscription(
    service_url: str, topic: str, name: str = "pulsarlab-audit", auth: ClientAuth | None = None,
) -> Iterator[None]:
    """Hold a durable subscription at the earliest position for the whole run, so that ledgers
    every other subscription has acknowledged are not trimmed before the storage view is read
    (without it, default retention deletes them and the read-back would call them lost)."""
    c = pulsar_client(service_url, auth=auth)
    try:
        c.subscribe(topic, name, initial_position=pulsar.InitialPosition.Earliest).close()
    finally:
        c.close()
    try:
        yield
    finally:
        c = pulsar_client(service_url, auth=auth)
        try:
            c.subscribe(topic, name).unsubscribe()
        except Exception:  # best effort: a leftover subscription only keeps data longer
            pass
        finally:
            c.close()
