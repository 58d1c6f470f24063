"""Several scenario runs in a row (``scenario run A B --repeat N``): planned and checked before the
first cluster starts, run one after another, and judged together. On a running deployment
(``--on``), a scenario it cannot do is planned as skipped, with the reason, and never run."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pulsarlab.chaos import actions as chaos
from pulsarlab.chaos.network import NETWORK_ACTIONS
from pulsarlab.deployment import Endpoints, NodeControl
from pulsarlab.errors import PulsarlabError, UsageError
from pulsarlab.history.statuses import FAIL, overall_status
from pulsarlab.progress import Reporter
from pulsarlab.scenarios import model
from pulsarlab.scenarios.runner import Lab, fresh_run_dir, run_scenario
from pulsarlab.scenarios.verdict import SKIPPED, ScenarioVerdict


@dataclass(frozen=True)
class PlannedRun:
    scenario: model.Scenario
    run_dir: Path
    skip: str | None = None  # why the target cannot do it: reported, not run


def plan_runs(refs: list[str], repeat: int, out_dir: Path, on: Endpoints | None = None) -> list[PlannedRun]:
    """Every run asked for, validated before the first cluster starts; ``on`` a running deployment,
    each scenario also checked against it (a usage error when none of them fits)."""
    scenarios = [model.load(r) for r in refs]
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise UsageError(f"scenario named twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    plan = []
    for sc in scenarios:
        skip = None if on is None else unfit(sc, on)
        for i in range(1, repeat + 1):
            run_dir = out_dir / (sc.name if repeat == 1 else f"{sc.name}-{i}")
            fresh_run_dir(run_dir)  # a used folder is refused before any cluster starts
            plan.append(PlannedRun(sc, run_dir, skip))
    if on is not None and all(p.skip for p in plan):
        why = "; ".join(dict.fromkeys(f"{p.scenario.name}: {p.skip}" for p in plan))
        raise UsageError(f"no scenario asked for can run on the {on.topo.name!r} deployment in {on.state_dir}: {why}")
    return plan


def unfit(sc: model.Scenario, on: Endpoints) -> str | None:
    """Why ``sc`` cannot run on the deployment ``on`` (None: it can)."""
    problems = model.misfits(sc, on.topo)
    wanted = sc.topology.pulsar_version
    if wanted is not None and wanted != (running := on.pulsar_version()):
        problems.append(f"needs a deployment on Pulsar {wanted}; this one runs {running}")
    namespace = sc.workload.namespace or on.topo.namespaces[0].name
    for step in sc.schedule:  # what only the deployment tells: can its runtime do each fault here?
        if step.fault is not None and not problems:
            try:
                chaos.check(on, model.step_fault(step, f"persistent://{namespace}/topic"))
            except ValueError as exc:
                problems.append(str(exc))
    if not isinstance(on, NodeControl):
        problems.append(f"pulsarlab has no control of this deployment's nodes (the {on.runtime} runtime), and a "
                        "scenario's faults and their undoing act on them")
    return "; ".join(problems) or None


def run_plan(
    plan: list[PlannedRun], lab: Lab, runtime: str,
    progress: Callable[[], contextlib.AbstractContextManager[Reporter]], done: Callable[[ScenarioVerdict, Path], None],
    on: NodeControl | None = None,
) -> list[ScenarioVerdict]:
    """Each run in turn (``on`` the running deployment if given, else on a fresh cluster), with its
    own progress display, ``done`` called after each. A run that could not be done does not cancel
    the others (it is an inconclusive verdict, never a pass); a single run's error is raised as it is."""
    if on is not None and any(p.skip is None for p in plan):
        # a host that faults cannot reach refuses the runs before any starts
        on.preflight(network=any(f.action in NETWORK_ACTIONS for p in plan if p.skip is None for f in p.scenario.faults()))
    verdicts = []
    for p in plan:
        sc, run_dir = p.scenario, p.run_dir
        if p.skip is not None:
            verdict = ScenarioVerdict(sc.name, str(run_dir), sc.control, skipped=p.skip)
            run_dir.mkdir(parents=True, exist_ok=True)
            verdict.write(run_dir)
        else:
            try:
                with progress() as say:  # closed before ``done`` prints anything
                    verdict = run_scenario(sc, run_dir, lab, runtime, say=say, on=on)
            except PulsarlabError as exc:
                if len(plan) == 1:
                    raise
                verdict = ScenarioVerdict(sc.name, str(run_dir), sc.control,
                                          reasons=[f"the run failed: {str(exc).splitlines()[0]}"])
        verdicts.append(verdict)
        done(verdict, run_dir)
    return verdicts


def overall(verdicts: list[ScenarioVerdict]) -> str:
    """The batch's status from the runs that ran (a skipped one is shown, not judged)."""
    return overall_status(v.status for v in verdicts if v.status != SKIPPED)


def agreement(verdicts: list[ScenarioVerdict]) -> dict[str, bool]:
    """Per scenario run more than once: whether its runs' verdicts agree (status and each expectation)."""
    by_name: dict[str, set] = {}
    for v in verdicts:
        by_name.setdefault(v.scenario, set()).add(v.agreement_key())
    return {name: len(keys) == 1 for name, keys in by_name.items()}


def failed_expectations(verdicts: list[ScenarioVerdict]) -> list[str]:
    return [f"{v.scenario}: {j.name}" for v in verdicts for j in v.expectations if j.status == FAIL]


def reasons(verdicts: list[ScenarioVerdict]) -> Iterator[str]:
    return (f"{v.scenario}: {r}" for v in verdicts for r in v.reasons)
