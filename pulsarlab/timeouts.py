"""How long pulsarlab waits for each kind of thing, scaled by ``PULSARLAB_TIMEOUT_SCALE``.

A slow or busy machine (CI beside other jobs) sets the scale above 1 for every wait at once. The
scale is read when a wait starts, not when pulsarlab is imported, so a test or a caller that sets
it later is obeyed.
"""

from __future__ import annotations

from pulsarlab import settings

SECONDS: dict[str, float] = {
    "zookeeper": 60.0,  # serving, from start
    "init": 180.0,  # a cluster's metadata initialisation
    "bookie": 120.0,  # registered and writable
    "broker": 180.0,  # ready, from start
    "e2e": 90.0,  # the first message round trip once brokers are ready
    "stop": 30.0,  # a node's process gone and its ports free
    "archive": 120.0,  # the same for a node that records its class archive (an AOT cache takes 20-30 s to write)
    "session": 75.0,  # a killed node's metadata-store session expired
    "spark": 90.0,  # a Spark standalone master or worker up
    "end_position": 60.0,  # a topic's last message id, asked of any broker of a cluster (after a fault)
}


def scale() -> float:
    """The factor every wait is multiplied by, as the environment gives it now (see :mod:`pulsarlab.settings`)."""
    return settings.current().timeout_scale


def timeout(kind: str) -> float:
    """Seconds to wait for ``kind`` (a key of :data:`SECONDS`), scaled."""
    try:
        base = SECONDS[kind]
    except KeyError:
        raise KeyError(f"no timeout {kind!r} (known: {', '.join(SECONDS)})") from None
    return base * scale()
