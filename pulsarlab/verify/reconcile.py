"""Every file of a history checked against the others before the Spark job judges it, on the driver.

The files of a run folder and what each says that another can confirm:

- each Parquet part: its footer (row counts, where its columns lie, its schema) against the file
  and the history's schema (:mod:`.parts`); the ops of its rows against those the history defines;
- a read-back part: its ``scan`` rows (how many messages, up to which) against its ``read`` rows;
- ``_run.json``: the drivers of the run and their own final counts against the parts there are
  and the rows they hold, and whether the run and each driver finished (:mod:`.evidence`);
- ``faults.parquet``: readable, of the faults' schema;
- a journal a writer left (it died): salvaged into a part first, or named when it cannot be.

A part whose rows turn out unreadable on the way (a damaged page behind a sound footer) is left
out and everything is reconciled again without it. Each problem is one reason of the verdict,
naming the file; any of them makes it inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulsarlab.history import salvage_journals
from pulsarlab.history.faults import APPLIED, FAULTS_FILE, HEALED, read_faults
from pulsarlab.history.schema import part_files
from pulsarlab.verify.dims import Dims, read_dims
from pulsarlab.verify.evidence import Evidence, driver_contradictions, judge, read_manifests, read_scans
from pulsarlab.verify.parts import UnreadablePart, readable_parts, unknown_ops, unreadable_reason
from pulsarlab.verify.reading import first_line


@dataclass
class Reconciled:
    """The parts the verdict may read, their dimensions, the manifests, what the evidence lacks or
    contradicts (``evidence``) and notes for the verdict."""

    paths: list[Path]
    dims: Dims
    manifests: list[dict[str, Any]]
    evidence: Evidence
    notes: list[str] = field(default_factory=list)
    left_out: dict[Path, str] = field(default_factory=dict)  # parts found unreadable past their footer, and why


def reconcile(directories: list[Path], left_out: dict[Path, str] | None = None) -> Reconciled:
    """Cross-check the history's files (the module docstring); ``left_out`` names parts found
    unreadable later (by the Spark job), with why, to judge without."""
    left_out = dict(left_out or {})
    while True:
        try:
            return _reconcile(directories, left_out)
        except UnreadablePart as exc:
            if exc.path in left_out:
                raise
            left_out[exc.path] = exc.why


def _reconcile(directories: list[Path], left_out: dict[Path, str]) -> Reconciled:
    problems = [line for d in directories for line in salvage_journals(d)[1]]
    paths, unreadable = readable_parts(sorted(p for d in directories for p in part_files(d) if p not in left_out))
    problems += unreadable + [unreadable_reason(path, why) for path, why in sorted(left_out.items())]
    dims = read_dims(paths)
    problems += unknown_ops(dims.files)
    manifests = read_manifests(directories)
    evidence = judge(dims, read_scans([p for ops, ps in dims.files.items() if "scan" in ops for p in ps]), manifests)
    problems += driver_contradictions(manifests, set(paths))
    notes: list[str] = []
    faults = []
    for d in directories:
        try:
            faults += read_faults(d) or []
        except (OSError, ValueError, TypeError, KeyError) as exc:
            problems.append(f"faults file {d / FAULTS_FILE} cannot be read ({first_line(exc)}): what the run went "
                            "through is not known")
    if faults:  # evidence of what the run went through, counted beside the events
        failed = sum(not f.ok for f in faults)
        notes.append(f"{len(faults)} fault(s) in the history ({FAULTS_FILE}): {sum(f.phase == APPLIED for f in faults)} "
                     f"applied, {sum(f.phase == HEALED for f in faults)} healed" + (f", {failed} failed" if failed else ""))
    evidence.contradicted = evidence.contradicted or bool(problems)
    if not paths:
        problems.append("empty history: no Parquet parts in " + ", ".join(map(str, directories)))
    elif not dims.producers:
        problems.append("no message was sent in these histories: nothing to judge")
    evidence.reasons[:0] = problems  # a file's problem first: what follows may be its consequence
    if dims.foreign:
        shown = ", ".join(dims.foreign[:5]) + (", ..." if len(dims.foreign) > 5 else "")
        notes.append(f"{len(dims.foreign)} producer(s) sent nothing in these histories; their messages (another run's) "
                     f"are left out: {shown}")
    return Reconciled(paths, dims, manifests, evidence, notes, left_out)
