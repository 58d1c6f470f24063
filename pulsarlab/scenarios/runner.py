"""Run a scenario: a fresh cluster (or a running deployment, ``on``), the workload with its schedule
of faults and waits, the fresh cluster always taken down (a running deployment's faults always
undone: it keeps running), then the verifier, RPO, RTO and the expectations judged.

A run directory holds the history (as ``workload run`` writes it, with the faults the schedule ran
in ``faults.parquet``), ``verdict.json`` (the verifier's) and ``scenario.json`` (the scenario's
verdict). The cluster lives in ``<run dir>.cluster/`` beside it (node logs stay there after ``down``).

The runner composes what the orchestration layer does (bring a cluster up, run a workload) and is
given that layer's functions as a :class:`Lab` by its caller (``pulsarlab scenario run`` gives
:mod:`pulsarlab.ops`'s): nothing here imports it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from pulsarlab.admin.client import admin_of
from pulsarlab.chaos.actions import Fault
from pulsarlab.chaos.network import remove_all
from pulsarlab.chaos.schedule import Scheduler, Wait
from pulsarlab.deployment import Endpoints, NodeControl, Say, UpResult, quiet
from pulsarlab.errors import UsageError
from pulsarlab.history.faults import read_faults
from pulsarlab.scenarios import placement
from pulsarlab.scenarios.conditions import WaitRecord, wait_for
from pulsarlab.scenarios.failover import failover_of_run
from pulsarlab.scenarios.model import Scenario, Step, step_fault
from pulsarlab.scenarios.rto import Rto, rto_of_run
from pulsarlab.scenarios.verdict import ScenarioVerdict, judge
from pulsarlab.topology import Role, namespace_clusters, topic_cluster
from pulsarlab.workload.run import Counters, WorkloadResult

TOPOLOGY_FILE = "scenario-topology.yaml"


@dataclass(frozen=True)
class Lab:
    """What a scenario run needs of the orchestration layer, given by its caller (``pulsarlab
    scenario run`` gives :mod:`pulsarlab.ops`'s functions): bring a topology up fresh, name a
    topic, run a workload with a fault schedule."""

    up: Callable[..., tuple[UpResult, NodeControl]]
    default_topic: Callable[[Endpoints, str, str], str]
    workload_run: Callable[..., WorkloadResult]


def waited(cluster: Endpoints, topic: str, step: Step, say: Say, what: str, started_s: float | None = None,
           stop: threading.Event | None = None) -> WaitRecord:
    """Wait for a step's condition, and say how it went."""
    rec = wait_for(cluster, topic, step.words, step.timeout, started_s, stop)
    say(f"{what} {rec.condition}: {'held' if rec.held else 'NOT held'} after {rec.seconds:.1f}s ({rec.seen})")
    return rec


def schedule_steps(cluster: Endpoints, steps: list[Step], topic: str, say: Say) -> list[Fault | Wait]:
    """The scenario's schedule as the fault scheduler runs it: its faults (``{topic}`` filled in)
    and its waits."""
    def wait(step: Step) -> Wait:
        return Wait(step.at, step.timeout, lambda now, stop: waited(cluster, topic, step, say, "wait", now, stop))

    return [wait(s) if s.wait is not None else step_fault(s, topic) for s in steps]


def fresh_run_dir(run_dir: Path) -> Path:
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UsageError(f"{run_dir} is not empty: every scenario run writes a folder of its own")
    state = run_dir.with_name(run_dir.name + ".cluster")
    if (state / "state.json").exists():
        raise UsageError(f"{state} holds a cluster's state: take it down ('pulsarlab down --state-dir {state}') or "
                         "choose another --out")
    return state


def run_scenario(
    sc: Scenario, run_dir: Path, lab: Lab, runtime: str = "local", say: Say = quiet,
    tick: Callable[[Counters], None] | None = None, on: NodeControl | None = None,
) -> ScenarioVerdict:
    """One run of ``sc``: on a fresh cluster, down again when this returns or raises; or ``on`` a
    running deployment (checked to fit by the caller: :func:`pulsarlab.scenarios.model.misfits`),
    whose faults are undone when this returns or raises (:func:`restore`)."""
    started = time.monotonic()
    state_dir = fresh_run_dir(run_dir)
    if on is not None:
        state_dir = on.state_dir
    else:
        state_dir.mkdir(parents=True, exist_ok=True)
        topo_file = state_dir / TOPOLOGY_FILE
        topo_file.write_text(yaml.safe_dump(sc.topology_model().model_dump(mode="json", exclude_none=True),
                                            sort_keys=False))
    sv = ScenarioVerdict(sc.name, str(run_dir), sc.control)
    schedule: Scheduler | None = None
    workload_ran = False
    cluster: NodeControl | None = on
    try:
        if on is None:
            say(f"scenario {sc.name}: starting a fresh {sc.topology.ref} cluster ({runtime}) in {state_dir}")
            _, cluster = lab.up(str(topo_file), runtime, state_dir, say=say)
        else:
            say(f"scenario {sc.name}: on the running {on.topo.name} deployment in {state_dir} ({on.runtime})")
        assert cluster is not None
        topic = _topic(lab, cluster, sc)
        cname = sc.workload.cluster or topic_cluster(cluster.topo, topic)
        admin_of(cluster, cname).create_topic(topic, sc.workload_config(topic).partitions)
        sv.waits += [waited(cluster, topic, s, say, "setup").to_json() for s in sc.setup]
        if all(w["held"] for w in sv.waits):
            # faults count from the first acknowledged send; each one is a row of the run's history
            schedule = Scheduler(cluster, schedule_steps(cluster, sc.schedule, topic, say), history=run_dir, say=say,
                                 end_after_s=sc.end_after_schedule_s, settle_s=sc.settle_s())
            say(f"workload on {topic}: {sc.workload_config(topic).duration:g}s of producing")
            lab.workload_run(state_dir, sc.workload_config(topic), run_dir, sc.workload.cluster, sc.workload.region,
                             tick, sc.workload.consume_cluster, schedule=schedule)
            workload_ran = True
            if sc.expect.placement is not None:  # read while the cluster is up, its faults not yet undone
                say("reading where the run's ledgers have copies")
                sv.placement = placement.read(cluster, topic, sc.workload_config(topic).partitions)
        else:
            sv.reasons.append("a setup condition did not hold: the workload and the faults did not run")
    finally:
        if cluster is not None:
            if on is None:
                take_down(cluster, say)
            else:
                restore(cluster, say)
    if schedule is not None:
        _record_schedule(sv, sc, schedule, run_dir)
    verdict, rto, moved = None, None, None
    if workload_ran:
        from pulsarlab.verify import verify  # Spark loads slowly: only once there is a history

        say("verifying the history (PySpark)")
        verdict = verify(run_dir, expect=sc.expectations())
        rto = rto_of_run(run_dir)
        _fill(sv, verdict, rto)
        if sc.workload_config("x").client_failover:
            moved = failover_of_run(run_dir)
            sv.failover = moved.to_json()
    # a setup wait that failed is a precondition not met (in reasons), not a finding
    sv.expectations = judge(sc, verdict, rto, [w.to_json() for w in schedule.waits] if schedule else [],
                            sv.placement, moved)
    sv.seconds = time.monotonic() - started
    run_dir.mkdir(parents=True, exist_ok=True)
    sv.write(run_dir)
    return sv


def _record_schedule(sv: ScenarioVerdict, sc: Scenario, schedule: Scheduler, run_dir: Path) -> None:
    """The faults as the history has them, the waits, and what keeps the schedule's record short."""
    sv.faults = read_faults(run_dir) or []
    sv.waits += [w.to_json() for w in schedule.waits]
    if not schedule.started:
        sv.reasons.append("the workload never had a send acknowledged: no fault ran")
        return
    if schedule.finished is False:
        sv.reasons.append("the schedule did not finish within its steps' timeouts")
    sv.reasons += [f"fault did not run: {r.fault} at {r.offset_s:.1f}s: {r.error_line}" for r in sv.faults if not r.ok]
    missing = len([s for s in sc.schedule if s.fault is not None]) - len(sv.faults)
    if missing > 0:
        sv.reasons.append(f"{missing} fault(s) of the schedule never ran")


def _fill(sv: ScenarioVerdict, verdict, rto: Rto) -> None:
    sv.checks = verdict.counts()
    sv.verifier_status = verdict.status
    sv.rpo = None if verdict.reasons else verdict.check("lost").count  # a guess when evidence is missing
    sv.rto = rto.to_json()
    sv.reasons += list(verdict.reasons)


def _topic(lab: Lab, cluster: Endpoints, sc: Scenario) -> str:
    suffix = f"{sc.name}-{run_tag()}"
    if sc.workload.namespace:
        return f"persistent://{sc.workload.namespace}/{suffix}"
    return lab.default_topic(cluster, sc.workload.cluster or cluster.topo.clusters[0].name, suffix)


def run_tag() -> str:
    """The random part of a run's topic name: led by a letter, so that the name never ends in
    ``-partition-<number>`` (a scenario named ``sync-partition`` with eight hex digits that happened
    to be decimal ones: Pulsar reads such a name as partition N of a topic ``sync`` and refuses to
    create it, and the verifier would read it so too)."""
    return f"r{uuid.uuid4().hex[:8]}"


def take_down(cluster: NodeControl, say: Say = quiet) -> None:
    """Every node stopped and the data wiped (paused nodes are resumed first so they can stop)."""
    try:
        for n in cluster.status():
            if n.paused:
                cluster.resume_node(n.name)
    finally:
        stopped = cluster.down()
        say(f"cluster down: {len(stopped)} nodes stopped")


def restore(cluster: NodeControl, say: Say = quiet) -> list[str]:
    """Undo what a run's faults left on a deployment that keeps running: its packet filter rules
    removed, paused nodes resumed, stopped nodes started again (tier by tier, each waited for until
    ready) and, when a broker was among them, every namespace unloaded so that its bundles go back
    to the brokers its isolation policy prefers. Returns the nodes started again."""
    try:
        if cut := remove_all(cluster):
            say(f"healed: {cut} packet filter rule(s) of this deployment removed")
        for n in cluster.status():
            if n.paused:
                cluster.resume_node(n.name)
    finally:
        down = [n.name for n in cluster.topo.nodes if not cluster.alive(n.name)]
        if down:
            say(f"starting again what the faults stopped: {', '.join(down)}")
            cluster.start_group(down)
    topo = cluster.topo
    if any(topo.node(n).role == Role.BROKER for n in down):
        for ns in topo.namespaces:
            for c in namespace_clusters(topo, ns):
                admin_of(cluster, c).unload_namespace(ns.name)
        say(f"namespaces unloaded, their bundles placed again: {', '.join(ns.name for ns in topo.namespaces)}")
    return down
