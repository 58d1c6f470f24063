"""Grafana provisioning for a deployment's Prometheus: a datasource and two dashboards, as files a
Grafana reads at start (``paths.provisioning``).

Bookies: entries and bytes written and read, per bookie and per region (what the blog watched to see
that reads stay in their region while writes go to both). Brokers: message rates, backlog, and
geo-replication backlog, rate and delay. Every query names only metrics the nodes of Pulsar 4.0 export
(a cluster test checks each name against a live Prometheus).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

DATASOURCE_UID = "pulsarlab-prometheus"
# PromQL words that are not metric names
_PROMQL_WORDS = {"sum", "rate", "irate", "increase", "by", "without", "avg", "max", "min", "count", "topk",
                 "histogram_quantile", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
                 "offset", "bool", "clamp_min", "label_replace"}


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str
    legend: str
    unit: str = "short"


OK = 'success="true"'
BOOKIE_PANELS = [
    Panel("Entries written per bookie", f"sum by (node, region) (rate(bookie_BOOKIE_ADD_ENTRY_count{{{OK}}}[1m]))",
          "{{node}} ({{region}})", "ops"),
    Panel("Entries written per region", f"sum by (region) (rate(bookie_BOOKIE_ADD_ENTRY_count{{{OK}}}[1m]))",
          "{{region}}", "ops"),
    Panel("Entries read per bookie", f"sum by (node, region) (rate(bookie_BOOKIE_READ_ENTRY_count{{{OK}}}[1m]))",
          "{{node}} ({{region}})", "ops"),
    Panel("Entries read per region", f"sum by (region) (rate(bookie_BOOKIE_READ_ENTRY_count{{{OK}}}[1m]))",
          "{{region}}", "ops"),
    Panel("Bytes written per bookie", "sum by (node, region) (rate(bookie_WRITE_BYTES[1m]))",
          "{{node}} ({{region}})", "Bps"),
    Panel("Bytes read per bookie", "sum by (node, region) (rate(bookie_READ_BYTES[1m]))",
          "{{node}} ({{region}})", "Bps"),
]
BROKER_PANELS = [
    Panel("Messages in per broker", "sum by (node, cluster) (pulsar_rate_in)", "{{node}} ({{cluster}})", "ops"),
    Panel("Messages out per broker", "sum by (node, cluster) (pulsar_rate_out)", "{{node}} ({{cluster}})", "ops"),
    Panel("Backlog per namespace", "sum by (cluster, namespace) (pulsar_msg_backlog)",
          "{{cluster}} {{namespace}}", "short"),
    Panel("Storage write latency (ms, mean)",
          "sum by (node) (rate(pulsar_storage_write_latency_sum[1m])) / "
          "sum by (node) (rate(pulsar_storage_write_latency_count[1m]))", "{{node}}", "ms"),
    Panel("Replication backlog (entries)", "sum by (cluster, remote_cluster) (pulsar_replication_backlog)",
          "{{cluster}} → {{remote_cluster}}", "short"),
    Panel("Replication rate out", "sum by (cluster, remote_cluster) (pulsar_replication_rate_out)",
          "{{cluster}} → {{remote_cluster}}", "ops"),
    Panel("Replication delay (s)", "max by (cluster, remote_cluster) (pulsar_replication_delay_in_seconds)",
          "{{cluster}} → {{remote_cluster}}", "s"),
]
DASHBOARDS = {"pulsarlab-bookies": ("pulsarlab: bookies", BOOKIE_PANELS),
              "pulsarlab-brokers": ("pulsarlab: brokers", BROKER_PANELS)}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (label matchers, ranges and strings left out)."""
    text = re.sub(r'"[^"]*"', "", expr)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    return {m for m in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text) if m not in _PROMQL_WORDS}


def dashboard(uid: str, title: str, panels: list[Panel]) -> dict:
    """One Grafana dashboard: two time-series panels a row."""
    return {
        "uid": uid, "title": title, "tags": ["pulsarlab"], "timezone": "utc", "schemaVersion": 39,
        "refresh": "5s", "time": {"from": "now-15m", "to": "now"},
        "panels": [
            {
                "id": i + 1, "type": "timeseries", "title": p.title,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
                "fieldConfig": {"defaults": {"unit": p.unit}, "overrides": []},
                "targets": [{"refId": "A", "expr": p.expr, "legendFormat": p.legend,
                             "datasource": {"type": "prometheus", "uid": DATASOURCE_UID}}],
            }
            for i, p in enumerate(panels)
        ],
    }


def dashboards() -> dict[str, dict]:
    return {uid: dashboard(uid, title, panels) for uid, (title, panels) in DASHBOARDS.items()}


def queried_metrics() -> set[str]:
    """Every metric name any dashboard queries."""
    return {name for _, panels in DASHBOARDS.values() for p in panels for name in metric_names(p.expr)}


def provisioning_files(prometheus_url: str, dashboards_path: str) -> dict[str, str]:
    """Grafana's provisioning as ``{relative path: text}``: the datasource, the dashboard provider
    (reading ``dashboards_path``, where Grafana will see ``dashboards/json``) and the dashboards."""
    ds = {"apiVersion": 1, "datasources": [{"name": "Prometheus", "type": "prometheus", "uid": DATASOURCE_UID,
                                            "access": "proxy", "url": prometheus_url, "isDefault": True}]}
    provider = {"apiVersion": 1, "providers": [{"name": "pulsarlab", "folder": "pulsarlab", "type": "file",
                                                "options": {"path": dashboards_path}}]}
    files = {"datasources/prometheus.yaml": yaml.safe_dump(ds, sort_keys=False),
             "dashboards/pulsarlab.yaml": yaml.safe_dump(provider, sort_keys=False)}
    for uid, board in dashboards().items():
        files[f"dashboards/json/{uid}.json"] = json.dumps(board, indent=2) + "\n"
    return files


def write_provisioning(out: Path, prometheus_url: str, dashboards_path: str | None = None) -> list[Path]:
    """Write :func:`provisioning_files` under ``out``; by default the provider reads the dashboards
    where they are written."""
    json_dir = (out / "dashboards" / "json").resolve()
    written = []
    for rel, text in provisioning_files(prometheus_url, dashboards_path or str(json_dir)).items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
