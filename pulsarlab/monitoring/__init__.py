"""Monitoring: a Prometheus that scrapes every ZooKeeper, bookie and broker of a deployment, and
Grafana provisioning (a datasource and dashboards) for it. The scrape targets come from the
topology alone, so any runtime that binds the topology's addresses is covered."""

from pulsarlab.monitoring.prometheus import MonitoringError, Prometheus, PrometheusTarget
from pulsarlab.monitoring.targets import ScrapeTarget, scrape_targets

__all__ = ["MonitoringError", "Prometheus", "PrometheusTarget", "ScrapeTarget", "scrape_targets"]
