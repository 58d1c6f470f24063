"""Several scenario runs in a row (``scenario run A B --repeat N``): planned and checked before the
first cluster starts, run one after another, and judged together."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from pulsarlab.errors import PulsarlabError, UsageError
from pulsarlab.progress import Reporter
from pulsarlab.scenarios import model
from pulsarlab.scenarios.runner import Lab, fresh_run_dir, run_scenario
from pulsarlab.scenarios.verdict import ScenarioVerdict
from pulsarlab.verify.model import FAIL, INCONCLUSIVE, PASS


def plan_runs(refs: list[str], repeat: int, out_dir: Path) -> list[tuple[model.Scenario, Path]]:
    """Every run asked for, validated before the first cluster starts."""
    scenarios = [model.load(r) for r in refs]
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise UsageError(f"scenario named twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    plan = []
    for sc in scenarios:
        for i in range(1, repeat + 1):
            run_dir = out_dir / (sc.name if repeat == 1 else f"{sc.name}-{i}")
            fresh_run_dir(run_dir)  # a used folder is refused before any cluster starts
            plan.append((sc, run_dir))
    return plan


def run_plan(
    plan: list[tuple[model.Scenario, Path]], lab: Lab, runtime: str,
    progress: Callable[[], contextlib.AbstractContextManager[Reporter]], done: Callable[[ScenarioVerdict, Path], None],
) -> list[ScenarioVerdict]:
    """Each run in turn, with its own progress display, ``done`` called after each. A run that could
    not be done does not cancel the others (it is an inconclusive verdict, never a pass); a single
    run's error is raised as it is."""
    verdicts = []
    for sc, run_dir in plan:
        try:
            with progress() as say:  # closed before ``done`` prints anything
                verdict = run_scenario(sc, run_dir, lab, runtime, say=say)
        except PulsarlabError as exc:
            if len(plan) == 1:
                raise
            verdict = ScenarioVerdict(sc.name, str(run_dir), sc.control, reasons=[f"the run failed: {str(exc).splitlines()[0]}"])
        verdicts.append(verdict)
        done(verdict, run_dir)
    return verdicts


def overall(verdicts: list[ScenarioVerdict]) -> str:
    states = {v.status for v in verdicts}
    return FAIL if FAIL in states else (INCONCLUSIVE if INCONCLUSIVE in states or not verdicts else PASS)


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
