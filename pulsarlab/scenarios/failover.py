"""Client failover between clusters, from a run's history: when clients that fail over by themselves
(the workload's ``client_failover``) moved to another cluster after their own was lost, when they
came back, and what asynchronous replication had not carried over when they moved.

The history says which cluster served each event (``served_by``: the driver reports every switch;
see :func:`pulsarlab.history.journal.write_meta`). The loss is the run's first fault that did damage,
from when it took effect (``FaultRow.from_ts``); the return is the first healing fault after it,
from when it began: a ``start`` returns once every node it starts is ready, and clients come back
as soon as one broker serves (seen: a producer back on eu 5 s before the start of eu's four nodes
returned, on a loaded machine), so its end would leave their switch back uncounted.

- ``failover_s`` per client: from the loss to its first ack (producer) or delivery (consumer) on a
  cluster other than its own;
- ``switch_back_s``: from the return to its first ack or delivery on its own cluster again: the
  lost nodes' own restart, the client's probe and its switch-back delay;
- ``async_rpo``: messages acknowledged on the lost cluster before the loss that the other cluster
  did not hold when the clients moved to it: missing from its storage, or stored there only after
  the first message the moved producers wrote to it directly (the log of a topic on a cluster is
  in arrival order, and the lost cluster could send nothing while it was gone). Were the lost
  cluster never to return, these messages would be lost: the real RPO of asynchronous replication.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsarlab.history.faults import APPLIED, HEALED, read_faults
from pulsarlab.scenarios.rto import read_columns

COLUMNS = ("op", "type", "producer", "consumer", "seq", "cluster", "served_by", "topic", "ts", "read_index")


@dataclass
class ClientFailover:
    client: str
    home: str | None
    failover_s: float | None  # None: it never acked or received on another cluster after the loss
    switch_back_s: float | None  # None: never back on its own cluster after the return (or no return)
    moved_to: list[str] = field(default_factory=list)


@dataclass
class Failover:
    lost_cluster: str | None
    loss_ns: int | None
    return_ns: int | None
    clients: list[ClientFailover]
    async_rpo: int | None  # None: not measurable (no producer wrote to another cluster)
    acked_before_loss: int = 0  # on the lost cluster: what async_rpo is out of

    @property
    def measured(self) -> bool:
        return self.loss_ns is not None and bool(self.clients)

    def max_failover_s(self) -> float | None:
        return _worst([c.failover_s for c in self.clients])

    def max_switch_back_s(self) -> float | None:
        return _worst([c.switch_back_s for c in self.clients])

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "max_failover_s": self.max_failover_s(), "max_switch_back_s": self.max_switch_back_s()}


def _worst(values: list[float | None]) -> float | None:
    """The largest figure; None when there is none, or a client never got one."""
    return None if not values or any(v is None for v in values) else max(v for v in values if v is not None)


def _first_after(ts: np.ndarray, mask: np.ndarray, after: int | None) -> float | None:
    if after is None:
        return None
    hits = ts[mask & (ts >= after)]
    return float(hits.min() - after) / 1e9 if len(hits) else None


def _client(name: str, ts: np.ndarray, clusters: np.ndarray, loss: int | None, back: int | None) -> ClientFailover:
    home = clusters[0] if len(clusters) else None
    away = clusters != home
    return ClientFailover(name, home, _first_after(ts, away, loss), _first_after(ts, ~away, back),
                          sorted({str(c) for c in clusters[away]}))


def compute(events: pa.Table, loss: int | None, back: int | None) -> Failover:
    """The figures from a history's events and the loss and return times (wall clock, ns)."""
    sends = events.filter(pc.and_(pc.equal(events["op"], "send"), pc.equal(events["type"], "ok")))
    received = events.filter(pc.equal(events["op"], "receive"))
    clients = []
    homes: dict[str, str] = {}
    for table, column in ((sends, "producer"), (received, "consumer")):
        for name in sorted(n for n in pc.unique(table[column]).to_pylist() if n is not None):
            mine = table.filter(pc.equal(table[column], name)).sort_by("ts")
            served = pc.coalesce(mine["served_by"], mine["cluster"])
            c = _client(name, mine["ts"].to_numpy(), np.array(served.to_pylist(), dtype=object), loss, back)
            clients.append(c)
            if column == "producer" and c.home is not None:
                homes[name] = c.home
    lost = next(iter(set(homes.values())), None) if len(set(homes.values())) == 1 else None
    rpo, before = _async_rpo(sends, events.filter(pc.equal(events["op"], "read")), lost, loss)
    return Failover(lost, loss, back, clients, rpo, before)


def _async_rpo(sends: pa.Table, reads: pa.Table, lost: str | None, loss: int | None) -> tuple[int | None, int]:
    if lost is None or loss is None:
        return None, 0
    before = sends.filter(pc.and_(pc.equal(sends["cluster"], lost), pc.less(sends["ts"], loss)))
    direct = sends.filter(pc.not_equal(sends["cluster"], lost))
    if direct.num_rows == 0:
        return None, before.num_rows
    # held when the clients moved: on every cluster they moved to, stored before the first direct write
    early = [_stored_early(reads, direct, other) for other in sorted(set(direct["cluster"].to_pylist()))]
    keys = zip(before["producer"].to_pylist(), before["seq"].to_pylist(), strict=True)
    return sum(1 for key in keys if not all(key in held for held in early)), before.num_rows


def _stored_early(reads: pa.Table, direct: pa.Table, cluster: str) -> set[tuple[str, int]]:
    """The messages ``cluster`` stored (per topic) before the first one written to it directly."""
    mine = reads.filter(pc.equal(reads["cluster"], cluster))
    here = direct.filter(pc.equal(direct["cluster"], cluster))
    direct_keys = set(zip(here["producer"].to_pylist(), here["seq"].to_pylist(), strict=True))
    early: set[tuple[str, int]] = set()
    for topic in pc.unique(mine["topic"]).to_pylist():
        rows = mine.filter(pc.equal(mine["topic"], topic)).sort_by("read_index")
        for producer, seq in zip(rows["producer"].to_pylist(), rows["seq"].to_pylist(), strict=True):
            if (producer, seq) in direct_keys:
                break
            early.add((producer, seq))
    return early


def failover_of_run(directory: str | Path) -> Failover:
    """The failover figures of a run directory (its events and its faults)."""
    faults = [r for r in read_faults(directory) or [] if r.ok]
    loss = next((r for r in faults if r.phase == APPLIED), None)
    back = next((r for r in faults if r.phase == HEALED and loss is not None and r.ts >= loss.ts), None)
    return compute(read_columns(directory, COLUMNS), loss.from_ts if loss else None, back.ts if back else None)
