"""Scenarios: a topology, a workload, a schedule of faults and waits, and expectations, run on a fresh
cluster and judged with RPO and RTO (see ``docs/scenarios.md``). The model is
:mod:`pulsarlab.scenarios.model`; nothing is imported here, so naming one module of the package
(the CLI's ``scenario list``) does not load the others."""
