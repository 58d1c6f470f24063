"""Monitoring: a Prometheus that scrapes every ZooKeeper, bookie and broker of a deployment, and
Grafana provisioning (a datasource and dashboards) for it. The scrape targets come from the
topology alone, so any runtime that binds the topology's addresses is covered.
Nothing is imported here: the modules are :mod:`~pulsarlab.monitoring.prometheus`,
:mod:`~pulsarlab.monitoring.targets`, :mod:`~pulsarlab.monitoring.service`,
:mod:`~pulsarlab.monitoring.grafana` and :mod:`~pulsarlab.monitoring.ports`."""
