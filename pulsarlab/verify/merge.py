"""On the driver: the few partial results merged; exact percentiles and the longest gap."""

from __future__ import annotations

import math
from typing import Any

from pulsarlab.verify.plan import REPLICATION_HIST, Gap, add_found

PERCENTILES = (0.5, 0.95, 0.99, 0.999)
_COUNTED = ("sent", "acknowledged", "failed", "info", "indeterminate", "stored", "delivered")



# -- on the driver ------------------------------------------------------------------------------
def merge(results: list[Any]) -> dict[str, Any]:
    """All partial results together."""
    total: dict[str, Any] = {name: 0 for name in _COUNTED}
    total.update(found={}, minmax={}, gaps=[], hist={"pub": ([], []), "e2e": ([], [])})
    hist: dict[str, dict[int, int]] = {"pub": {}, "e2e": {}}
    for r in results:
        for name in _COUNTED:
            total[name] += r.get(name, 0)
        for name, (count, examples) in r.get("found", {}).items():
            add_found(total["found"], name, count, examples)
        for name, value in r.get("minmax", {}).items():
            old = total["minmax"].get(name)
            use = min if name.startswith("min") else max
            total["minmax"][name] = value if old is None else use(old, value)
        total["gaps"] += r.get("gaps", [])
        for name, (keys, counts) in r.get("hist", {}).items():
            h = hist.setdefault(name, {})
            for k, n in zip(keys, counts, strict=True):
                h[k] = h.get(k, 0) + n
    total["hist"] = hist
    return total


def percentiles(hist: dict[int, int], maximum: int | None) -> dict[str, float | None]:
    """p50/p95/p99/p99.9 (nearest rank) and max of latencies in ns, in ms to the microsecond."""
    names = ("p50", "p95", "p99", "p99_9")
    out: dict[str, float | None] = dict.fromkeys(names)
    n = sum(hist.values())
    if n:
        keys = sorted(hist)
        for name, p in zip(names, PERCENTILES, strict=True):
            rank, seen = max(math.ceil(p * n), 1), 0
            for k in keys:
                seen += hist[k]
                if seen >= rank:
                    out[name] = round(k * 500 / 1e6, 3)
                    break
    out["max"] = round(maximum / 1e6, 3) if maximum is not None else None
    return out


def replication_delays(hist: dict[str, dict[int, int]], minmax: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per destination cluster (sorted), the percentiles of its replication delays and how many
    messages they cover; empty when no message was delivered on a cluster other than its own."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(h for h in hist if h.startswith(REPLICATION_HIST)):
        count = sum(hist[name].values())
        if count:
            out[name.removeprefix(REPLICATION_HIST)] = {**percentiles(hist[name], minmax.get(f"max_{name}")), "count": count}
    return out


def longest_gap(buckets: list[tuple[int, int, int, list[Gap]]], first_invoke: int, last_send: int) -> dict[str, Any]:
    """The longest interval without an ack from the buckets' first/last ack and longest inner gaps,
    with the run's first invoke and last send event as two more points."""
    segments: list[list[Any]] = [[lo, hi, list(top)] for _, lo, hi, top in sorted(buckets)]  # [first, last, gaps]
    for p in (first_invoke, last_send):
        inside = next((s for s in segments if s[0] < p < s[1]), None)
        if inside is None:
            segments.append([p, p, []])
            continue
        top = inside[2]
        if top and top[0][1] <= p <= top[0][2]:  # the point splits the bucket's longest gap
            g, a, b = top[0]
            inside[2] = [(p - a, a, p), (b - p, p, b), *top[1:]]
    segments.sort(key=lambda s: (s[0], s[1]))
    best: tuple[int, int, int] | None = None
    candidates = [(g, a, b) for s in segments for g, a, b in s[2]]
    candidates += [(nxt[0] - cur[1], cur[1], nxt[0]) for cur, nxt in zip(segments, segments[1:], strict=False)]
    for g, a, b in candidates:
        key = (g, -a, b)
        best = key if best is None or key > best else best
    if best is None:
        return {"seconds": 0.0, "from_ts": first_invoke, "to_ts": first_invoke}
    return {"seconds": best[0] / 1e9, "from_ts": -best[1], "to_ts": best[2]}
