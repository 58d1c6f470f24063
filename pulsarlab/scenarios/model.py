"""The scenario model: topology + workload + a schedule of faults and waits + expectations.

A scenario is a YAML file (built-ins live in ``builtin/``). Everything that can be checked without a
running cluster is checked when it is loaded, and a violation raises :class:`ScenarioError` naming
the field: unknown keys, a workload the driver would refuse, a fault action that is not registered
in :data:`pulsarlab.chaos.actions.ACTIONS`, a node the topology does not have, an unknown check.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from pulsarlab.chaos import actions as chaos
from pulsarlab.errors import TopologyError, UsageError, yaml_problem
from pulsarlab.topology import Topology, parse
from pulsarlab.topology import load as load_topology
from pulsarlab.topology.model import name_problem
from pulsarlab.upgrade import fault as _upgrade_fault  # noqa: F401 - registers the 'upgrade' fault
from pulsarlab.verify.model import CHECKS, INFORMATIONAL, Expectations, unknown_names
from pulsarlab.workload.run import WorkloadConfig

BUILTIN_DIR = Path(__file__).parent / "builtin"
TOPIC_PLACEHOLDER = "{topic}"


class ScenarioError(UsageError):
    """A scenario file breaks a rule; ``field`` is a dotted path into it."""

    def __init__(self, source: str, field: str, rule: str) -> None:
        self.field = field
        super().__init__(f"invalid scenario {source}: {field}: {rule}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NamespaceOverride(_Strict):
    """Settings of one namespace of the topology that this scenario alone changes."""

    persistence: dict[str, int] | None = None
    deduplication: bool | None = None


class ClusterOverride(_Strict):
    """Settings of one cluster of the topology that this scenario alone changes."""

    skip_unrecoverable_data: bool | None = None
    placement_repair_s: int | None = None


class TopologySpec(_Strict):
    """A built-in topology name or a file, with per-scenario overrides of its clusters and namespaces."""

    ref: str
    clusters: dict[str, ClusterOverride] = Field(default_factory=dict)
    namespaces: dict[str, NamespaceOverride] = Field(default_factory=dict)
    address_prefix: str | None = None  # 127.<x>: run beside a cluster on the topology's usual addresses
    pulsar_version: str | None = None  # the release the cluster starts on (a running deployment must run it)


class WorkloadSpec(_Strict):
    """Where the workload runs; the rest of the mapping is :class:`WorkloadConfig`'s fields."""

    namespace: str | None = None  # the topic is <namespace>/<scenario>-<run id>; default: the first namespace
    cluster: str | None = None  # the producers' cluster
    consume_cluster: str | None = None
    region: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)


class Step(_Strict):
    """One step of a schedule: a fault at ``at`` seconds after the first acknowledged send, or a wait for a
    condition (from ``at`` if given, else right after the previous step), for up to ``timeout``."""

    at: float | None = Field(default=None, ge=0)
    fault: str | None = None
    wait: str | None = None
    timeout: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _one_kind(self) -> Step:
        if (self.fault is None) == (self.wait is None):
            raise ValueError("a step is either 'fault: ACTION ARGS' or 'wait: CONDITION ARGS'")
        if self.fault is not None and self.at is None:
            raise ValueError("a fault needs 'at' (seconds after the first acknowledged send)")
        return self

    @property
    def words(self) -> list[str]:
        return shlex.split(self.fault or self.wait or "")


class Expect(_Strict):
    """What must hold. ``checks``: the verifier's forbid/allow/forbid_only; ``rpo``: at most this many
    acknowledged messages lost; ``rto_max_s``: every producer's first successful send after each fault
    within this; ``outage_max_s`` / ``outage_min_s``: bounds on each producer's longest window without an
    ack; ``stall_max_s``: a bound on the longest window without an ack while each node a rolling
    upgrade moves is away; ``resume_max_s``: a bound on how long such a window may go on after the
    node is ready again (the clients' part of a stall, whatever the restart itself took);
    ``expect_failure``: checks that must come out non-zero (a control); ``allow_on``: a check allowed
    on the named clusters only (it must stay at zero on every other cluster); ``placement``:
    where the run's ledgers must have copies when it ends."""

    checks: dict[str, list[str]] = Field(default_factory=dict)
    rpo: int | None = Field(default=None, ge=0)
    rto_max_s: float | None = Field(default=None, gt=0)
    outage_max_s: float | None = Field(default=None, gt=0)
    outage_min_s: float | None = Field(default=None, ge=0)
    stall_max_s: float | None = Field(default=None, gt=0)
    resume_max_s: float | None = Field(default=None, gt=0)
    # clients that fail over by themselves (workload client_failover): each one's first ack or delivery
    # on another cluster after the loss, and on its own again after the return, within these; at most
    # async_rpo_max messages acknowledged on the lost cluster missing from the other when they moved
    failover_max_s: float | None = Field(default=None, gt=0)
    switch_back_max_s: float | None = Field(default=None, gt=0)
    async_rpo_max: int | None = Field(default=None, ge=0)
    expect_failure: list[str] = Field(default_factory=list)
    allow_on: dict[str, list[str]] = Field(default_factory=dict)
    # every_region: when the run ends, each ledger of its topic has a copy in every region of its
    # cluster, read from the ledger metadata (scenarios/placement.py)
    placement: Literal["every_region"] | None = None


PER_CLUSTER_CHECKS = ("duplicated_in_storage",)  # the checks the verifier counts per cluster


class Scenario(_Strict):
    name: str
    description: str = ""
    topology: TopologySpec
    workload: WorkloadSpec
    setup: list[Step] = Field(default_factory=list)  # waits before the workload starts
    schedule: list[Step] = Field(default_factory=list)
    # producing ends this long after the schedule's last step returned (the workload's duration stays
    # the upper bound): for a step whose length is not known beforehand, such as a rolling upgrade
    end_after_schedule_s: float | None = Field(default=None, ge=0)
    expect: Expect = Field(default_factory=Expect)

    # ----- derived ---------------------------------------------------------------------------
    def topology_model(self) -> Topology:
        """The topology with this scenario's overrides applied (validated again)."""
        base = load_topology(self.topology.ref)
        data = base.model_dump(mode="json", exclude_none=True)
        for key in ("address_prefix", "pulsar_version"):
            if (value := getattr(self.topology, key)) is not None:
                data[key] = value
        for section, overrides in (("clusters", self.topology.clusters), ("namespaces", self.topology.namespaces)):
            by_name = {x["name"]: x for x in data.get(section, [])}
            for name, over in overrides.items():
                if name not in by_name:
                    raise KeyError(f"{section}.{name}")
                by_name[name].update(over.model_dump(exclude_none=True))
        return parse(data)

    def settle_s(self) -> float | None:
        """The most producing waits, after the last fault returned and past the workload's duration
        if need be, for sends to be acknowledged again, so that the recovery is seen: the bound on it
        (``rto_max_s``, ``outage_max_s``, at least 10 s) and a margin. None without faults, or when
        ``end_after_schedule_s`` decides when producing ends."""
        if self.end_after_schedule_s is not None or not any(s.fault is not None for s in self.schedule):
            return None
        bounds = [b for b in (self.expect.rto_max_s, self.expect.outage_max_s) if b is not None]
        return max([10.0, *bounds]) + 5.0

    def workload_config(self, topic: str) -> WorkloadConfig:
        return WorkloadConfig(**{**self.workload.config, "topic": topic})

    def faults(self) -> list[chaos.Fault]:
        return [step_fault(s, "") for s in self.schedule if s.fault is not None]

    @property
    def control(self) -> bool:
        return bool(self.expect.expect_failure)

    def expectations(self) -> Expectations:
        """The verifier's expectations: the scenario's, with the failures a control expects allowed
        (the scenario judges them itself: they must be non-zero)."""
        data = dict(self.expect.checks)
        data["allow"] = [*data.get("allow", []), *self.expect.expect_failure, *self.expect.allow_on]
        return Expectations.from_mapping(data)


def step_fault(step: Step, topic: str) -> chaos.Fault:
    """The fault of a step, ``{topic}`` in its arguments replaced by the run's topic."""
    action, *args = step.words
    return chaos.Fault(step.at or 0.0, action, tuple(a.replace(TOPIC_PLACEHOLDER, topic) for a in args), step.timeout)


# ----- loading -------------------------------------------------------------------------------------
def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def load(ref: str) -> Scenario:
    """A scenario by built-in name or from a YAML file, validated."""
    path = BUILTIN_DIR / f"{ref}.yaml"
    if not path.is_file():
        path = Path(ref)
        if not path.is_file():
            raise UsageError(f"scenario {ref!r} is neither a built-in ({', '.join(builtin_names())}) nor a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"scenario is not valid YAML: {yaml_problem(path, exc)}") from None
    return parse_scenario(data, str(path) if path.parent != BUILTIN_DIR else ref)


def _normalise(data: dict) -> dict:
    """Accept the short forms: ``topology: sync``, ``setup: [topic_owned_in eu]``, and the workload's
    own fields beside ``namespace``/``cluster``/``consume_cluster``/``region``."""
    data = dict(data)
    if isinstance(data.get("topology"), str):
        data["topology"] = {"ref": data["topology"]}
    if isinstance(data.get("workload"), dict):
        w = dict(data["workload"])
        placed = {k: w.pop(k) for k in list(w) if k in WorkloadSpec.model_fields and k != "config"}
        data["workload"] = {**placed, "config": w}
    if isinstance(data.get("setup"), list):
        data["setup"] = [{"wait": s} if isinstance(s, str) else s for s in data["setup"]]
    return data


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Build and validate a scenario from plain data (a parsed YAML file)."""
    if not isinstance(data, dict):
        raise ScenarioError(source, "<root>", "a scenario file holds a mapping")
    try:
        sc = Scenario.model_validate(_normalise(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"] if p != "config"]
        raise ScenarioError(source, _dotted(loc), err["msg"].removeprefix("Value error, ")) from None
    validate(sc, source)
    return sc


def _dotted(loc: list[str]) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "<root>"


def validate(sc: Scenario, source: str) -> None:
    """Cross-field rules: the name (it names the run's folder), the topology and its overrides, the
    workload, faults, waits, checks."""
    if why := name_problem(sc.name):
        raise ScenarioError(source, "name", why)
    try:
        topo = sc.topology_model()
    except TopologyError as exc:
        raise ScenarioError(source, "topology", str(exc)) from None
    except KeyError as exc:
        section = exc.args[0].split(".", 1)[0]
        raise ScenarioError(source, f"topology.{exc.args[0]}", f"no such {section[:-1]} in the topology") from None
    _check_workload(sc, topo, source)
    _check_steps(sc, topo, source)
    _check_expect(sc, topo, source)


def misfits(sc: Scenario, topo: Topology) -> list[str]:
    """Why ``sc`` cannot run on a running deployment of ``topo`` (an empty list: it can): its
    workload, steps and checks against that topology, and every setting the scenario changes for
    itself that the deployment does not already have (a running deployment is not reconfigured)."""
    problems = []
    for check in (_check_workload, _check_steps, _check_expect):
        try:
            check(sc, topo, f"on {topo.name!r}")
        except ScenarioError as exc:
            problems.append(str(exc).split(": ", 1)[1])
    want = sc.topology_model()
    for section, overrides in (("clusters", sc.topology.clusters), ("namespaces", sc.topology.namespaces)):
        have = {x.name: x for x in getattr(topo, section)}
        wanted = {x.name: x for x in getattr(want, section)}
        for name, over in overrides.items():
            if name not in have:
                problems.append(f"needs {section[:-1]} {name!r}, which topology {topo.name!r} lacks")
                continue
            for key in over.model_dump(exclude_none=True):
                w, h = getattr(wanted[name], key), getattr(have[name], key)
                if w != h:
                    problems.append(f"needs {section[:-1]} {name} with {key} {_shown(w)}; the deployment has {_shown(h)}")
    return problems


def _shown(v: Any) -> str:
    return str(v.model_dump(exclude_none=True) if isinstance(v, BaseModel) else v)


def _check_workload(sc: Scenario, topo: Topology, source: str) -> None:
    w = sc.workload
    known = {f.name for f in dataclasses.fields(WorkloadConfig)} - {"topic"}
    for k in w.config:
        if k not in known:
            every = sorted(known | {"namespace", "cluster", "consume_cluster", "region"})
            raise ScenarioError(source, f"workload.{k}", f"unknown field (known: {', '.join(every)})")
    try:
        TypeAdapter(WorkloadConfig).validate_python({**w.config, "topic": "x"})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = _dotted(["workload", *[str(p) for p in err["loc"]]])
        raise ScenarioError(source, field, err["msg"].removeprefix("Value error, ")) from None
    for name, value in (("cluster", w.cluster), ("consume_cluster", w.consume_cluster)):
        if value is not None and value not in {c.name for c in topo.clusters}:
            raise ScenarioError(source, f"workload.{name}", f"no cluster {value!r} in topology {topo.name!r}")
    if w.namespace is not None and w.namespace not in {n.name for n in topo.namespaces}:
        raise ScenarioError(source, "workload.namespace", f"no namespace {w.namespace!r} in topology {topo.name!r}")


def _check_steps(sc: Scenario, topo: Topology, source: str) -> None:
    """Setup holds waits only; the schedule's times rise and end before producing does."""
    duration = sc.workload_config("x").duration
    previous = 0.0
    for section in ("setup", "schedule"):
        for i, step in enumerate(getattr(sc, section)):
            field = f"{section}[{i}]"
            if section == "setup" and (step.fault is not None or step.at is not None):
                raise ScenarioError(source, field, "setup holds waits only (they run before the workload starts)")
            if step.at is not None:
                if step.at < previous:
                    raise ScenarioError(source, f"{field}.at", f"{step.at:g} s is before the previous step's {previous:g} s")
                if step.at >= duration:
                    raise ScenarioError(source, f"{field}.at",
                                        f"{step.at:g} s is past the workload's {duration:g} s of producing")
                previous = step.at
            if step.wait is not None:
                _check_condition(step, topo, source, f"{field}.wait")
            else:
                _check_fault(step, topo, source, f"{field}.fault", sc.workload.namespace or topo.namespaces[0].name)


def _check_expect(sc: Scenario, topo: Topology, source: str) -> None:
    if typo := unknown_names([*sc.expect.expect_failure, *[c for v in sc.expect.checks.values() for c in v]], CHECKS):
        raise ScenarioError(source, "expect", f"unknown check(s): {typo} (checks: {', '.join(CHECKS)})")
    clusters = {c.name for c in topo.clusters}
    for c, where in sc.expect.allow_on.items():
        if c not in PER_CLUSTER_CHECKS:
            raise ScenarioError(source, f"expect.allow_on.{c}",
                                f"only checks counted per cluster can be allowed per cluster: {', '.join(PER_CLUSTER_CHECKS)}")
        unknown = sorted(set(where) - clusters)
        if unknown or not where:
            raise ScenarioError(source, f"expect.allow_on.{c}",
                                f"no cluster {unknown[0]!r} in the topology" if unknown else "names no cluster")
    asked = [k for k in ("failover_max_s", "switch_back_max_s", "async_rpo_max") if getattr(sc.expect, k) is not None]
    if asked and not sc.workload_config("x").client_failover:
        raise ScenarioError(source, f"expect.{asked[0]}", "judges clients that fail over: set workload.client_failover")
    if set(sc.expect.expect_failure) & INFORMATIONAL:
        raise ScenarioError(source, "expect.expect_failure",
                            f"informational checks cannot be expected to fail: {sorted(INFORMATIONAL)}")
    try:
        sc.expectations()
    except ValueError as exc:
        raise ScenarioError(source, "expect.checks", str(exc)) from None


class _TopologyOnly:
    """What a fault's argument check may see before any cluster runs: the topology."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo

    def __getattr__(self, name: str) -> Any:
        raise _NeedsCluster(name)


class _NeedsCluster(Exception):
    pass


def _check_fault(step: Step, topo: Topology, source: str, field: str, namespace: str) -> None:
    fault = step_fault(step, f"persistent://{namespace}/topic")
    if fault.action not in chaos.ACTIONS:
        raise ScenarioError(source, field, f"unknown fault action {fault.action!r}: registered actions are "
                                           f"{', '.join(sorted(chaos.ACTIONS))}")
    try:
        chaos.check(_TopologyOnly(topo), fault)
    except _NeedsCluster:
        pass  # this action checks its arguments against a running cluster: done again before the run's faults start
    except ValueError as exc:
        why = str(exc)
        if any(why.endswith(f": {a}") for a in fault.args):
            why += f" (no such node in topology {topo.name!r}, nor a target this action resolves)"
        raise ScenarioError(source, field, why) from None


def _check_condition(step: Step, topo: Topology, source: str, field: str) -> None:
    from pulsarlab.scenarios.conditions import CONDITIONS

    name, *args = step.words
    if name not in CONDITIONS:
        raise ScenarioError(source, field, f"unknown condition {name!r}: one of {', '.join(sorted(CONDITIONS))}")
    try:
        CONDITIONS[name].check_args(topo, args)
    except ValueError as exc:
        raise ScenarioError(source, field, f"{name}: {exc}") from None
