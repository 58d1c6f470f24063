"""The report's Plotly figures: events per second and latency percentiles over the run, with the
faults as labelled vertical lines. Each figure is built from :mod:`.aggregate`'s few thousand points."""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pulsarlab.history.faults import FaultRow
from pulsarlab.report.aggregate import NS, Aggregates, Latencies, Rates

KIND_COLOURS: Final[dict[str, str]] = {
    "sent": "#1f77b4",
    "acknowledged": "#2ca02c",
    "failed": "#d62728",
    "unknown outcome": "#ff7f0e",
    "delivered": "#9467bd",
    "consumer acks": "#8c564b",
    "consumer acks failed": "#e377c2",
}
CONSUMER_KINDS: Final = frozenset({"delivered", "consumer acks", "consumer acks failed"})
WIDE: Final = frozenset({"sent", "delivered"})
LOG_RATIO: Final = 30
"""Latency axes are logarithmic when the largest value plotted is this many times the smallest."""
CLUSTER_DASHES: Final = ("solid", "dash", "dot", "dashdot", "longdash")
PERCENTILE_STYLE: Final[dict[str, dict[str, Any]]] = {
    "p50": {"color": "#1f77b4"},
    "p95": {"color": "#ff7f0e"},
    "p99": {"color": "#d62728"},
    "max": {"color": "#7f7f7f", "dash": "dot"},
}
FAULT_COLOUR: Final = "#b2182b"
HEIGHT: Final = 420


def fault_x(fault: FaultRow, t0_ns: int) -> float:
    """Seconds since ``t0`` of a fault, by the wall clock when its action began."""
    return (fault.ts - t0_ns) / NS


def _layout(fig: go.Figure, title: str, y_title: str, *, log: bool = False, height: int = HEIGHT) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01},
        height=height,
        margin={"l": 70, "r": 20, "t": 60, "b": 50},
        legend={"orientation": "h", "y": -0.12 * HEIGHT / height},
        hovermode="x unified",
        template="plotly_white",
    )
    fig.update_xaxes(title_text="seconds since the first send, delivery or ack", zeroline=False)
    fig.update_yaxes(title_text=y_title, type="log" if log else "linear", rangemode="tozero", dtick=1 if log else None)
    return fig


def mark_faults(fig: go.Figure, faults: list[FaultRow], t0_ns: int) -> None:
    """A dashed vertical line per fault, labelled with the fault, written upwards beside the line."""
    for f in faults:
        fig.add_vline(
            x=fault_x(f, t0_ns),
            line={"color": FAULT_COLOUR, "dash": "dash", "width": 1.5},
            annotation={"text": f.fault, "textangle": -90, "font": {"color": FAULT_COLOUR, "size": 12},
                        "hovertext": f.done or f.error or f.fault, "xanchor": "left", "yanchor": "top"},
            annotation_position="top right",
        )


def rates_figure(rates: Rates) -> go.Figure:
    """Events per second, one line per kind of event and cluster: the producers' side above, the
    consumers' below. The first kind of each side is drawn wide so the next shows inside it where they agree."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("producers: sends and their outcomes", "consumers: deliveries and acknowledgements"))
    clusters = rates.clusters()
    many = len(clusters) > 1
    width = rates.bin_ns / NS
    x = np.append(rates.starts_s, rates.bins * width)  # the last value again at the end: each bin drawn its full width
    for (kind, cluster), _ in rates.counts.items():
        y = rates.per_second((kind, cluster))
        fig.add_trace(go.Scatter(
            x=x,
            y=np.append(y, y[-1:]),
            mode="lines",
            name=f"{kind} · {cluster or 'no cluster'}" if many else kind,
            line={"color": KIND_COLOURS[kind], "dash": CLUSTER_DASHES[clusters.index(cluster) % len(CLUSTER_DASHES)],
                  "width": 5 if kind in WIDE else 1.8, "shape": "hv"},
            hovertemplate="%{y:,.0f}/s",
        ), row=2 if kind in CONSUMER_KINDS else 1, col=1)
    per = "per second" if width == 1 else f"per second (average over {width:g} s bins)"
    fig = _layout(fig, f"Sends, acks and deliveries {per}", "events / s", height=2 * HEIGHT - 80)
    fig.update_xaxes(title_text=None, row=1, col=1)
    return fig


def _gaps(lat: Latencies, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every window from the first to the last, NaN where none had a sample: no line across a gap."""
    if not len(lat.starts_s):
        return lat.starts_s, values
    step = lat.window_ns / NS
    index = np.rint((lat.starts_s - lat.starts_s[0]) / step).astype(np.int64)
    full = np.full(index[-1] + 1, np.nan)
    full[index] = values
    return lat.starts_s[0] + np.arange(index[-1] + 1) * step, full


def latency_figure(lat: Latencies, title: str) -> go.Figure:
    """p50/p95/p99/max of one latency per window of send time; log scale when they span decades."""
    fig = go.Figure()
    counts = _gaps(lat, lat.count.astype(np.float64))[1]
    for name, values in lat.percentiles.items():
        x, y = _gaps(lat, values)
        fig.add_trace(go.Scatter(
            x=x,
            y=y,
            mode="lines+markers" if len(values) < 60 else "lines",
            name=name,
            line={"width": 1.6, **PERCENTILE_STYLE[name]},
            marker={"size": 4},
            customdata=counts,
            hovertemplate="%{y:,.3f} ms (%{customdata:,} messages)",
        ))
    values = np.concatenate(list(lat.percentiles.values())) if lat.samples else np.zeros(0)
    positive = values[values > 0]
    log = bool(len(positive)) and positive.max() / positive.min() > LOG_RATIO
    window = lat.window_ns / NS
    fig = _layout(fig, f"{title}: percentiles per {window:g} s of send time ({lat.samples:,} messages)",
                  "ms (log scale)" if log else "ms", log=log)
    if not lat.samples:
        fig.add_annotation(text="no samples in this history", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                           font={"size": 16})
    return fig


def longest_gap(fig: go.Figure, verdict: dict[str, Any] | None, t0_ns: int) -> None:
    """Shade the verdict's longest interval without an acknowledged send, when it lasted a second or more."""
    gap = ((verdict or {}).get("metrics") or {}).get("longest_gap_without_ack_s")
    if not isinstance(gap, dict) or not gap.get("seconds") or gap["seconds"] < 1 or gap.get("from_ts") is None:
        return
    fig.add_vrect(
        x0=(gap["from_ts"] - t0_ns) / NS, x1=(gap["to_ts"] - t0_ns) / NS,
        fillcolor="#fddbc7", opacity=0.5, line_width=0, layer="below",
        annotation={"text": f"longest gap without an ack: {gap['seconds']:.1f} s", "font": {"size": 11}},
        annotation_position="bottom left",
    )


def figures(agg: Aggregates, faults: list[FaultRow], verdict: dict[str, Any] | None) -> dict[str, go.Figure]:
    """The page's figures by element id, faults marked on each."""
    out = {
        "rates": rates_figure(agg.rates),
        "publish-latency": latency_figure(agg.publish, "Publish latency (send to broker ack)"),
        "e2e-latency": latency_figure(agg.end_to_end, "End-to-end latency (publish to first delivery)"),
    }
    longest_gap(out["rates"], verdict, agg.t0_ns)
    marks = [fault_x(f, agg.t0_ns) for f in faults]
    span = (min([0.0, *marks]), max([agg.rates.bins * agg.rates.bin_ns / NS, *marks]))  # one time axis for every plot
    for fig in out.values():
        mark_faults(fig, faults, agg.t0_ns)
        fig.update_xaxes(range=span)
    return out
