"""Where the lab's Prometheus listens, apart from what it scrapes: the CLI names it in its help
without loading the topology model."""

from __future__ import annotations

DEFAULT_PORT = 9090  # Prometheus's own port, on the lab's monitoring address
