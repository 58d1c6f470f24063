"""The verifier: prove from a run's history that nothing acknowledged was lost or duplicated.

The verdict's model is imported at once; the Spark job (:func:`verify`, :func:`spark_session`)
only when first named, so code that reads or writes verdicts does not load PySpark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pulsarlab.history.manifest import VERDICT_FILE
from pulsarlab.verify.model import CHECKS, DEFAULT_FORBIDDEN, Check, Expectations, Verdict

if TYPE_CHECKING:
    from pulsarlab.verify.job import verify
    from pulsarlab.verify.session import spark_session


def __getattr__(name: str) -> Any:
    if name == "verify":
        from pulsarlab.verify.job import verify

        return verify
    if name == "spark_session":
        from pulsarlab.verify.session import spark_session

        return spark_session
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CHECKS",
    "DEFAULT_FORBIDDEN",
    "VERDICT_FILE",
    "Check",
    "Expectations",
    "Verdict",
    "spark_session",
    "verify",
]
