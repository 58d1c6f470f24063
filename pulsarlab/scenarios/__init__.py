"""Scenarios: a topology, a workload, a schedule of faults and waits, and expectations, run on a fresh
cluster and judged with RPO and RTO (see ``docs/scenarios.md``)."""

from pulsarlab.scenarios.model import Scenario, ScenarioError, builtin_names, load, parse_scenario

__all__ = ["Scenario", "ScenarioError", "builtin_names", "load", "parse_scenario"]
