"""Rolling upgrades and rollbacks of a running deployment: the plan (order, gates, refusals) and its run."""
