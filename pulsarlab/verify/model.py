"""What the verifier returns: checks, metrics and the overall verdict, plus what a run may allow."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from rich.table import Table

from pulsarlab.errors import CheckFailed, Inconclusive
from pulsarlab.history.statuses import FAIL as FAIL  # the words, re-exported
from pulsarlab.history.statuses import INCONCLUSIVE as INCONCLUSIVE
from pulsarlab.history.statuses import PASS as PASS
from pulsarlab.verify.display import table

MAX_EXAMPLES: Final = 20

CHECKS: Final[tuple[str, ...]] = (
    "lost",
    "not_replicated",
    "never_delivered",
    "corrupted",
    "duplicated_in_storage",
    "duplicated_delivery",
    "unexpected",
    "failed_but_stored",
    "order_violations_producer",
    "order_violations_key",
    "recovered",
)
"""Every check the verifier runs, in report order."""

DEFAULT_FORBIDDEN: Final[frozenset[str]] = frozenset(CHECKS) - {"order_violations_key", "recovered"}
"""Checks that fail a run when non-zero unless a run's expectations say otherwise.

``order_violations_key`` is allowed by default (Shared subscriptions reorder legitimately);
``recovered`` is informational and can never fail a run.
"""

INFORMATIONAL: Final[frozenset[str]] = frozenset({"recovered"})

ABSENCE: Final[frozenset[str]] = frozenset({"lost", "not_replicated", "never_delivered"})
"""Checks that find what was *not* seen: guesses when evidence is missing."""

EXIT_CODES: Final[dict[str, int]] = {PASS: 0, FAIL: CheckFailed.exit_code, INCONCLUSIVE: Inconclusive.exit_code}
"""``pulsarlab verify`` exit codes per status (2 is a usage error)."""


def unknown_names(names: Iterable[str], known: Iterable[str]) -> str | None:
    """The names that are not among ``known``, each with the nearest known ones (a typo is an
    error that says what was meant, never a silent allowance); None when every name is known."""
    known = list(known)
    out = []
    for name in sorted(set(names) - set(known)):
        near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        out.append(f"{name} (did you mean {' or '.join(near)}?)" if near else name)
    return ", ".join(out) or None


@dataclass(frozen=True)
class Expectations:
    """Which checks must come out at zero for the run to pass."""

    forbidden: frozenset[str] = DEFAULT_FORBIDDEN

    def __post_init__(self) -> None:
        if unknown := unknown_names(self.forbidden, CHECKS):
            raise ValueError(f"unknown check(s) in expectations: {unknown}; known: {', '.join(CHECKS)}")
        if self.forbidden & INFORMATIONAL:
            raise ValueError(f"informational checks cannot be forbidden: {sorted(self.forbidden & INFORMATIONAL)}")

    def allows(self, check: str) -> bool:
        return check not in self.forbidden

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Expectations:
        """``{"forbid": [...], "allow": [...]}`` applied on top of the defaults.

        ``forbid_only: [...]`` replaces the default set instead.
        """
        if unknown_keys := unknown_names(data, ("forbid", "allow", "forbid_only")):
            raise ValueError(f"unknown expectation key(s): {unknown_keys}; known: forbid, allow, forbid_only")
        for key in ("forbid", "allow", "forbid_only"):  # a misspelt name is an error, never a silent allowance
            names = data.get(key, [])
            if not isinstance(names, list | tuple | set | frozenset) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"{key} must be a list of check names, not {names!r}")
            if unknown := unknown_names(names, CHECKS):
                raise ValueError(f"unknown check(s) in {key}: {unknown}; known: {', '.join(CHECKS)}")
        base = set(data["forbid_only"]) if "forbid_only" in data else set(DEFAULT_FORBIDDEN)
        forbidden = (base | set(data.get("forbid", ()))) - set(data.get("allow", ()))
        return cls(frozenset(forbidden))

    @classmethod
    def load(cls, path: str | Path) -> Expectations:
        """Read overrides from a JSON or YAML file (same keys as :meth:`from_mapping`)."""
        text = Path(path).read_text()
        if str(path).endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
        return cls.from_mapping(data)


@dataclass
class Check:
    """One check's outcome: how many anomalies, a few of them, and whether any are allowed."""

    name: str
    count: int
    examples: list[dict[str, Any]] = field(default_factory=list)
    allowed: bool = False
    by_cluster: dict[str, int] = field(default_factory=dict)  # per cluster, for the checks that say (storage duplicates)

    @property
    def passed(self) -> bool:
        return self.allowed or self.count == 0


@dataclass
class Verdict:
    """The verifier's answer for one or several run directories judged as one history.

    ``reasons`` is the missing evidence; ``presence_decisive`` says whether checks of presence
    still count when evidence is missing (not when a producer's own record may be short).
    """

    directories: list[str]
    checks: list[Check]
    metrics: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)
    presence_decisive: bool = True

    @property
    def directory(self) -> str:
        return ", ".join(self.directories)

    @property
    def status(self) -> str:
        failed = [c for c in self.checks if not c.passed]
        if not self.reasons:
            return FAIL if failed else PASS
        if self.presence_decisive and any(c.name not in ABSENCE for c in failed):
            return FAIL
        return INCONCLUSIVE

    @property
    def ok(self) -> bool:
        return self.status == PASS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def counts(self) -> dict[str, int]:
        return {c.name: c.count for c in self.checks}

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "ok": self.ok,
            "directories": self.directories,
            "seconds": round(self.seconds, 3),
            "reasons": self.reasons,
            "checks": [{**asdict(c), "passed": c.passed} for c in self.checks],
            "metrics": self.metrics,
            "notes": self.notes,
        }

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n")
        return path

    def render_table(self) -> Table:
        """Checks and headline metrics (times in UTC, durations with units); see :mod:`.display`."""
        return table(self)
