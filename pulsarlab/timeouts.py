"""How long pulsarlab waits for each kind of thing, scaled by ``PULSARLAB_TIMEOUT_SCALE``.

A slow or busy machine (CI beside other jobs) sets the scale above 1 for every wait at once. The
scale is read when a wait starts, not when pulsarlab is imported, so a test or a caller that sets
it later is obeyed.
"""

from __future__ import annotations

import os

from pulsarlab.errors import UsageError

SCALE_VARIABLE = "PULSARLAB_TIMEOUT_SCALE"
SECONDS: dict[str, float] = {
    "zookeeper": 60.0,  # serving, from start
    "init": 180.0,  # a cluster's metadata initialisation
    "bookie": 120.0,  # registered and writable
    "broker": 180.0,  # ready, from start
    "e2e": 90.0,  # the first message round trip once brokers are ready
    "stop": 30.0,  # a node's process gone and its ports free
    "session": 75.0,  # a killed node's metadata-store session expired
    "spark": 90.0,  # a Spark standalone master or worker up
}


def scale() -> float:
    text = os.environ.get(SCALE_VARIABLE, "").strip() or "1"
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise UsageError(f"{SCALE_VARIABLE}={text!r}: a positive number (e.g. 2 doubles every wait)")
    return value


def timeout(kind: str) -> float:
    """Seconds to wait for ``kind`` (a key of :data:`SECONDS`), scaled."""
    try:
        base = SECONDS[kind]
    except KeyError:
        raise KeyError(f"no timeout {kind!r} (known: {', '.join(SECONDS)})") from None
    return base * scale()
