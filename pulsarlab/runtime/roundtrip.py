"""End-to-end readiness: a real message produced and consumed through a cluster's brokers."""

from __future__ import annotations

import time
import uuid

import pulsar

from pulsarlab.errors import NodeStartError
from pulsarlab.security import ClientAuth, client


def roundtrip(
    cluster: str, service_url: str, timeout: float, topic: str | None = None, auth: ClientAuth | None = None
) -> float:
    """Produce one message and consume it back; return the seconds it took."""
    topic = topic or "persistent://public/default/pulsarlab-ready"
    marker = uuid.uuid4().hex.encode()
    start = time.monotonic()
    last = ""
    while time.monotonic() - start < timeout:
        c = client(service_url, operation_timeout=max(5, int(timeout / 3)), auth=auth)
        try:
            consumer = c.subscribe(topic, "pulsarlab-ready", initial_position=pulsar.InitialPosition.Latest)
            producer = c.create_producer(topic)
            producer.send(marker)
            deadline = time.monotonic() + max(5.0, timeout - (time.monotonic() - start))
            while time.monotonic() < deadline:
                msg = consumer.receive(timeout_millis=5000)
                consumer.acknowledge(msg)
                if msg.data() == marker:
                    return time.monotonic() - start
        except Exception as exc:  # the client raises plain pulsar exceptions of many kinds
            last = f"{type(exc).__name__}: {exc}"
            time.sleep(1)
        finally:
            c.close()
    raise NodeStartError(cluster, f"a message produced and consumed through {service_url}", timeout, "", last)
