"""Run a scenario: a fresh cluster, the workload with its schedule of faults and waits, the cluster
always taken down, then the verifier, RPO, RTO and the expectations judged.

A run directory holds the history (as ``workload run`` writes it), ``verdict.json`` (the verifier's),
``faults.json`` (each fault as it happened) and ``scenario.json`` (the scenario's verdict). The
cluster lives in ``<run dir>.cluster/`` beside it (node logs stay there after ``down``).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import yaml

from pulsarlab import ops
from pulsarlab.admin.client import admin_of
from pulsarlab.chaos import schedule as chaos
from pulsarlab.deployment import Deployment, Say, quiet
from pulsarlab.errors import UsageError
from pulsarlab.scenarios.conditions import WaitRecord, wait_for
from pulsarlab.scenarios.model import Scenario, Step, step_fault
from pulsarlab.scenarios.rto import Rto, rto_of_run
from pulsarlab.scenarios.verdict import FAULTS_FILE, ScenarioVerdict, judge
from pulsarlab.topology import topic_cluster
from pulsarlab.workload.run import Counters

TOPOLOGY_FILE = "scenario-topology.yaml"


class StepRunner:
    """The schedule in a background thread: faults at their offsets from the first acknowledged send,
    waits in between; records faults like :class:`~pulsarlab.chaos.schedule.FaultSchedule`."""

    def __init__(self, cluster: Deployment, steps: list[Step], topic: str, say: Say = quiet) -> None:
        self.cluster, self.steps, self.topic, self.say = cluster, steps, topic, say
        for s in steps:
            if s.fault is not None:
                chaos.check(cluster, step_fault(s, topic))  # now against the running cluster
        self.log = chaos.FaultLog()
        self.ended_ns: list[int] = []  # per record in ``log.done``: when the fault's action returned
        self.waits: list[WaitRecord] = []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scenario-steps", daemon=True)
        self._t0 = 0.0

    @property
    def started(self) -> bool:
        return self._t0 > 0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        for s in self.steps:
            if s.at is not None and self.stop.wait(max(0.0, self._t0 + s.at - time.monotonic())):
                return
            if self.stop.is_set():
                return
            now = time.monotonic() - self._t0
            if s.wait is not None:
                rec = wait_for(self.cluster, self.topic, s.words, s.timeout, now, self.stop)
                self.waits.append(rec)
                self.say(f"wait {rec.condition}: {'held' if rec.held else 'NOT held'} after {rec.seconds:.1f}s ({rec.seen})")
                continue
            fault = step_fault(s, self.topic)
            wall = time.time_ns()
            try:
                done = chaos.ACTIONS[fault.action](self.cluster, fault.args)
                self.ended_ns.append(time.time_ns())
                self.log.done.append(chaos.FaultRecord(now, wall, fault, done))
                self.say(f"fault at {now:.1f}s: {done}")
            except Exception as exc:  # reported in the verdict: the scenario did not do what it says
                self.log.errors.append(f"{fault} at {now:.1f}s: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")

    def join(self) -> bool:
        """Wait for the remaining steps; False if they did not finish in their allotted time."""
        if not self.started:
            return True
        last = max((s.at or 0.0 for s in self.steps), default=0.0)
        budget = max(0.0, self._t0 + last - time.monotonic()) + sum(s.timeout + 30 for s in self.steps)
        self._thread.join(budget)
        return not self._thread.is_alive()


def fresh_run_dir(run_dir: Path) -> Path:
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UsageError(f"{run_dir} is not empty: every scenario run writes a folder of its own")
    state = run_dir.with_name(run_dir.name + ".cluster")
    if (state / "state.json").exists():
        raise UsageError(f"{state} holds a cluster's state: take it down ('pulsarlab down --state-dir {state}') or "
                         "choose another --out")
    return state


def run_scenario(
    sc: Scenario, run_dir: Path, runtime: str = "local", say: Say = quiet, tick: Callable[[Counters], None] | None = None,
) -> ScenarioVerdict:
    """One run of ``sc`` on a fresh cluster; the cluster is down again when this returns or raises."""
    started = time.monotonic()
    state_dir = fresh_run_dir(run_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    topo_file = state_dir / TOPOLOGY_FILE
    topo_file.write_text(yaml.safe_dump(sc.topology_model().model_dump(mode="json", exclude_none=True), sort_keys=False))
    sv = ScenarioVerdict(sc.name, str(run_dir), sc.control)
    steps: StepRunner | None = None
    workload_ran = False
    cluster: Deployment | None = None
    try:
        say(f"scenario {sc.name}: starting a fresh {sc.topology.ref} cluster ({runtime}) in {state_dir}")
        _, cluster = ops.up(str(topo_file), runtime, state_dir, say=say)
        topic = _topic(cluster, sc)
        cname = sc.workload.cluster or topic_cluster(cluster.topo, topic)
        admin_of(cluster, cname).create_topic(topic, sc.workload_config(topic).partitions)
        for s in sc.setup:
            rec = wait_for(cluster, topic, s.words, s.timeout)
            sv.waits.append(rec.to_json())
            say(f"setup {rec.condition}: {'held' if rec.held else 'NOT held'} after {rec.seconds:.1f}s ({rec.seen})")
        if all(w["held"] for w in sv.waits):
            steps = StepRunner(cluster, sc.schedule, topic, say)

            def on_tick(c: Counters) -> None:
                if c.acked and not steps.started:  # faults count from the first acknowledged send, as FaultSchedule does
                    steps.start()
                if tick is not None:
                    tick(c)

            say(f"workload on {topic}: {sc.workload_config(topic).duration:g}s of producing")
            try:
                ops.workload_run(state_dir, sc.workload_config(topic), run_dir, sc.workload.cluster,
                                 sc.workload.region, tick=on_tick, consume_cluster=sc.workload.consume_cluster,
                                 before_read=steps.join)  # storage is read back once every fault is done
                workload_ran = True
            finally:
                if not steps.join():
                    sv.reasons.append("the schedule did not finish within its steps' timeouts")
                steps.stop.set()
            if not steps.started:
                sv.reasons.append("the workload never had a send acknowledged: no fault ran")
        else:
            sv.reasons.append("a setup condition did not hold: the workload and the faults did not run")
    finally:
        if cluster is not None:
            take_down(cluster, say)
    if steps is not None:
        sv.faults = [{"at_s": round(r.at, 3), "wall_ns": r.wall_ns, "ended_ns": end, "fault": str(r.fault), "done": r.done}
                     for r, end in zip(steps.log.done, steps.ended_ns, strict=True)]
        sv.waits += [w.to_json() for w in steps.waits]
        sv.reasons += [f"fault did not run: {e}" for e in steps.log.errors]
        (run_dir / FAULTS_FILE).write_text(json.dumps({"faults": sv.faults, "errors": steps.log.errors}, indent=2) + "\n")
        missing = len([s for s in sc.schedule if s.fault is not None]) - len(sv.faults) - len(steps.log.errors)
        if missing > 0 and steps.started:
            sv.reasons.append(f"{missing} fault(s) of the schedule never ran")
    verdict, rto = None, None
    if workload_ran:
        from pulsarlab.verify import verify  # Spark loads slowly: only once there is a history

        say("verifying the history (PySpark)")
        verdict = verify(run_dir, expect=sc.expectations())
        rto = rto_of_run(run_dir, [(f["fault"], f["at_s"], f["ended_ns"]) for f in sv.faults])
        _fill(sv, verdict, rto)
    # a setup wait that failed is a precondition not met (in reasons), not a finding
    sv.expectations = judge(sc, verdict, rto, [w.to_json() for w in steps.waits] if steps else [])
    sv.seconds = time.monotonic() - started
    run_dir.mkdir(parents=True, exist_ok=True)
    sv.write(run_dir)
    return sv


def _fill(sv: ScenarioVerdict, verdict, rto: Rto) -> None:
    sv.checks = verdict.counts()
    sv.verifier_status = verdict.status
    sv.rpo = None if verdict.reasons else verdict.check("lost").count  # a guess when evidence is missing
    sv.rto = rto.to_json()
    sv.reasons += list(verdict.reasons)


def _topic(cluster: Deployment, sc: Scenario) -> str:
    suffix = f"{sc.name}-{uuid.uuid4().hex[:8]}"
    if sc.workload.namespace:
        return f"persistent://{sc.workload.namespace}/{suffix}"
    return ops.default_topic(cluster, sc.workload.cluster or cluster.topo.clusters[0].name, suffix)


def take_down(cluster: Deployment, say: Say = quiet) -> None:
    """Every node stopped and the data wiped (paused nodes are resumed first so they can stop)."""
    try:
        for n in cluster.status():
            if n.paused:
                cluster.resume_node(n.name)
    finally:
        stopped = cluster.down()
        say(f"cluster down: {len(stopped)} nodes stopped")
