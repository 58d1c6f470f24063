"""A scenario's verdict: the verifier's checks, RPO, RTO, the faults as they happened, and each
expectation judged pass / fail / inconclusive."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from pulsarlab.history.faults import FaultRow
from pulsarlab.scenarios import placement
from pulsarlab.scenarios.failover import Failover
from pulsarlab.scenarios.model import Scenario
from pulsarlab.scenarios.rto import Rto
from pulsarlab.verify.model import ABSENCE, EXIT_CODES, FAIL, INCONCLUSIVE, PASS, Check, Verdict

SCENARIO_FILE = "scenario.json"
SKIPPED = "skipped"  # not run: the target cannot do it (the reason is in ``skipped``)


@dataclass
class Judged:
    """One expectation: what was asked, what was seen, and the outcome."""

    name: str
    expected: str
    actual: Any
    status: str  # pass | fail | inconclusive


@dataclass
class ScenarioVerdict:
    scenario: str
    run_dir: str
    control: bool
    faults: list[FaultRow] = field(default_factory=list)  # as the run's history has them
    waits: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, int] = field(default_factory=dict)
    rpo: int | None = None
    rto: dict[str, Any] | None = None
    expectations: list[Judged] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # why the evidence is short (inconclusive)
    verifier_status: str | None = None
    seconds: float = 0.0
    skipped: str | None = None  # why the target cannot run it (then nothing ran)
    placement: dict[str, Any] | None = None  # the run's ledgers and their regions (placement.read)
    failover: dict[str, Any] | None = None  # clients that fail over: when they moved, came back, async RPO

    @property
    def status(self) -> str:
        if self.skipped is not None:
            return SKIPPED
        states = {j.status for j in self.expectations}
        if FAIL in states:
            return FAIL
        if self.reasons or INCONCLUSIVE in states or not self.expectations:
            return INCONCLUSIVE
        return PASS

    @property
    def exit_code(self) -> int:
        return 0 if self.status == SKIPPED else EXIT_CODES[self.status]

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario, "status": self.status, "control": self.control, "run_dir": self.run_dir,
            "seconds": round(self.seconds, 1), "rpo": self.rpo, "rto": self.rto, "checks": self.checks,
            "faults": [{"fault": f.fault, **asdict(f)} for f in self.faults], "waits": self.waits,
            "verifier_status": self.verifier_status,
            "expectations": [j.__dict__ for j in self.expectations], "reasons": self.reasons,
            "skipped": self.skipped, "placement": self.placement, "failover": self.failover,
        }

    def write(self, run_dir: Path) -> Path:
        path = run_dir / SCENARIO_FILE
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path

    def agreement_key(self) -> tuple:
        """What two runs of one scenario must share to agree: the status and each expectation's outcome."""
        return self.status, tuple((j.name, j.status) for j in self.expectations)

    def render_table(self) -> Table:
        colour = {PASS: "green", FAIL: "red", INCONCLUSIVE: "yellow", SKIPPED: "blue"}
        t = Table(title=f"scenario {self.scenario}: [{colour[self.status]}]{self.status.upper()}[/]"
                        + (" (control: a failure must be detected)" if self.control else ""))
        t.add_column("what")
        t.add_column("expected")
        t.add_column("seen", overflow="fold")
        t.add_column("")
        if self.skipped is not None:
            t.add_row("skipped", "", self.skipped, f"[blue]{SKIPPED}[/]")
            return t
        for j in self.expectations:
            t.add_row(j.name, j.expected, _cell(j.actual), f"[{colour[j.status]}]{j.status}[/]")
        t.add_section()
        t.add_row("RPO (acked messages lost)", "", _cell(self.rpo), "")
        for p in (self.rto or {}).get("producers", []):
            rec = ", ".join(f"{f['fault']} @{f['at_s']:.1f}s → {_recovery(f)}" for f in p["faults"]) or "no fault"
            longest = _secs(p["longest_without_ack_s"])
            t.add_row(f"RTO {p['producer'].rsplit('-', 1)[-1]}", "", f"{rec}; longest without ack {longest}", "")
        for st in (self.rto or {}).get("stalls", []):
            stall = st["longest_without_ack_s"]
            shown = "not measured (nothing sent meanwhile)" if stall is None else _secs(stall)
            after = st.get("after_ready_s")
            tail = "" if after is None else f", {_secs(after)} of it after the node was ready"
            t.add_row(f"stall {st['node']}", "", f"away {_secs(st['away_s'])}; longest without ack {shown}{tail} "
                                                 f"({st['fault']})", "")
        self._failover_rows(t)
        t.add_section()
        for f in self.faults:
            t.add_row(f"fault @{f.offset_s:.1f}s", "", f"{f.fault}: {f.done if f.ok else f'FAILED: {f.error_line}'}", "")
        for w in self.waits:
            held = "held" if w["held"] else "NOT held"
            t.add_row("wait", w["condition"], f"{held} after {w['seconds']:.1f}s ({_wait_seen(w)})", "")
        nonzero = {k: v for k, v in self.checks.items() if v}
        t.add_row("checks", "", ", ".join(f"{k}={v}" for k, v in nonzero.items()) or "all zero", "")
        if self.reasons:
            t.caption = "inconclusive evidence:\n" + "\n".join(f"- {r}" for r in self.reasons)
        return t

    def _failover_rows(self, t: Table) -> None:
        fo = self.failover
        if not fo:
            return
        for c in fo["clients"]:
            moved = f"to {', '.join(c['moved_to'])} after {_secs(c['failover_s'])}" if c["moved_to"] else "never moved"
            t.add_row(f"failover {c['client'].rsplit('-', 1)[-1]}", "", f"from {c['home']} {moved}; back after "
                                                                       f"{_secs(c['switch_back_s'])}", "")
        rpo = fo["async_rpo"]
        t.add_row("async RPO (acked on the lost cluster, not on the other when clients moved)", "",
                  "not measured" if rpo is None else f"{rpo} of {fo['acked_before_loss']}", "")


def _recovery(f: dict) -> str:
    return _secs(f["recovery_s"]) if f.get("sent_after", True) else "no send after it"


def _secs(v: float | None) -> str:
    return "never" if v is None else f"{v:.2f}s"


def _cell(v: Any) -> str:
    return "-" if v is None else str(v)


def judge_allowed_on(c: Check, where: list[str], guessed: bool) -> Judged:
    """A check allowed on ``where`` only: zero on every other cluster, its count on each shown."""
    elsewhere = sum(n for cluster, n in c.by_cluster.items() if cluster not in where)
    shown = ", ".join(f"{cluster}: {n}" for cluster, n in c.by_cluster.items()) or str(c.count)
    unsplit = c.count and sum(c.by_cluster.values()) != c.count  # no per-cluster count to judge by
    status = INCONCLUSIVE if guessed or unsplit else (PASS if elsewhere == 0 else FAIL)
    return Judged(f"check {c.name}", f"= 0 outside {', '.join(where)}", shown, status)


def judge(sc: Scenario, verdict: Verdict | None, rto: Rto | None, waits: list[dict[str, Any]],
          placed: dict[str, Any] | None = None, failover: Failover | None = None) -> list[Judged]:
    """Each expectation of ``sc`` against what the run produced; evidence missing makes an
    expectation that needs it inconclusive, never a pass."""
    e = sc.expect
    out: list[Judged] = []
    short = verdict is None or bool(verdict.reasons)
    decisive_presence = verdict is not None and verdict.presence_decisive

    def guessed(check: str) -> bool:  # a count the missing evidence makes a guess
        return short and (check in ABSENCE or not decisive_presence)

    allowed = sc.expectations()
    if verdict is not None:
        for c in verdict.checks:
            if c.name in e.expect_failure:
                status = PASS if c.count > 0 else (INCONCLUSIVE if guessed(c.name) else FAIL)
                out.append(Judged(f"check {c.name}", "> 0 (control)", c.count, status))
            elif c.name in e.allow_on:
                out.append(judge_allowed_on(c, e.allow_on[c.name], guessed(c.name)))
            elif not allowed.allows(c.name):
                status = INCONCLUSIVE if guessed(c.name) else (PASS if c.count == 0 else FAIL)
                out.append(Judged(f"check {c.name}", "= 0", c.count, status))
    if e.rpo is not None:
        lost = verdict.check("lost").count if verdict is not None else None
        status = INCONCLUSIVE if lost is None or guessed("lost") else (PASS if lost <= e.rpo else FAIL)
        out.append(Judged("RPO", f"<= {e.rpo}", lost, status))
    if e.rto_max_s is not None:
        worst = rto.max_recovery_s if rto is not None else None
        if rto is None or not rto.measured:  # no fault with a send after it: nothing to judge
            out.append(Judged("RTO", f"<= {e.rto_max_s:g}s", None, INCONCLUSIVE))
        else:
            out.append(Judged("RTO", f"<= {e.rto_max_s:g}s", "never" if worst is None else round(worst, 3),
                              PASS if worst is not None and worst <= e.rto_max_s else FAIL))
    for name, bound, fits in (("outage_max_s", e.outage_max_s, lambda v, b: v <= b),
                              ("outage_min_s", e.outage_min_s, lambda v, b: v >= b)):
        if bound is None:
            continue
        value = rto.max_outage_s if rto is not None else None
        status = INCONCLUSIVE if value is None else (PASS if fits(value, bound) else FAIL)
        sign = "<=" if name == "outage_max_s" else ">="
        which = "max" if sign == "<=" else "min"
        seen = None if value is None else round(value, 3)
        out.append(Judged(f"longest window without ack ({which})", f"{sign} {bound:g}s", seen, status))
    out += [_judge_stalls(rto, bound, name, measure) for bound, name, measure in (
        (e.stall_max_s, "publish stall while a node restarts", "longest_without_ack_s"),
        (e.resume_max_s, "publishing resumes once a restarted node is ready", "after_ready_s")) if bound is not None]
    out += _judge_failover(sc, failover)
    if e.placement is not None:
        placed_seen, placed_status = placement.judged(placed)
        out.append(Judged("placement", "each ledger's entries with a copy in every region", placed_seen, placed_status))
    for w in waits:
        out.append(Judged(f"wait {w['condition']}", "holds within its timeout",
                          f"after {w['seconds']:.1f}s: {_wait_seen(w)}", PASS if w["held"] else FAIL))
    return out


def _wait_seen(w: dict[str, Any]) -> str:
    """What a wait saw last, and first when that differed (how far from holding it started)."""
    first = w.get("first_seen") or w["seen"]
    return w["seen"] if first == w["seen"] else f"at first {first}; at the end {w['seen']}"


def _judge_stalls(rto: Rto | None, bound: float, name: str, measure: str) -> Judged:
    """Each node a rolling fault moved: its ``measure`` (a :class:`NodeStall` field) within ``bound``;
    a node no producer sent across, or no node measured at all, leaves it inconclusive."""
    expected = f"<= {bound:g}s per node"
    stalls = rto.stalls if rto is not None else []
    values = {s.node: getattr(s, measure) for s in stalls}
    if not values or None in values.values():
        unmeasured = [node for node, v in values.items() if v is None]
        seen = f"not measured for {', '.join(unmeasured)}" if unmeasured else "no node moved"
        return Judged(name, expected, seen, INCONCLUSIVE)
    node, value = max(values.items(), key=lambda kv: kv[1])
    return Judged(name, expected, f"{value:.3f}s ({node})", PASS if value <= bound else FAIL)


def _judge_failover(sc: Scenario, fo: Failover | None) -> list[Judged]:
    """The failover bounds: a figure not measured (no loss, a client that never moved or never came
    back) fails a bound on time, as it would for a user; no figure at all is inconclusive."""
    e, out = sc.expect, []
    for name, bound, value in (
        ("clients fail over", e.failover_max_s, fo.max_failover_s() if fo else None),
        ("clients switch back", e.switch_back_max_s, fo.max_switch_back_s() if fo else None),
    ):
        if bound is None:
            continue
        if fo is None or not fo.measured:
            out.append(Judged(name, f"<= {bound:g}s", None, INCONCLUSIVE))
        else:
            out.append(Judged(name, f"<= {bound:g}s", "never" if value is None else round(value, 3),
                              PASS if value is not None and value <= bound else FAIL))
    if e.async_rpo_max is not None:
        rpo = fo.async_rpo if fo else None
        out.append(Judged("async RPO (acked on the lost cluster, missing on the other)", f"<= {e.async_rpo_max}",
                          rpo, INCONCLUSIVE if rpo is None else (PASS if rpo <= e.async_rpo_max else FAIL)))
    return out
