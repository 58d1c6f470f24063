"""The verifier: prove from a run's history that nothing acknowledged was lost or duplicated."""

from pulsarlab.verify.job import VERDICT_FILE, verify
from pulsarlab.verify.model import CHECKS, DEFAULT_FORBIDDEN, Check, Expectations, Verdict
from pulsarlab.verify.session import spark_session

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
