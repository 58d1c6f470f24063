"""Every wait's length from one table (``pulsarlab.timeouts``), scaled by PULSARLAB_TIMEOUT_SCALE.
The runtimes read the scale once at import and the Spark launcher at each wait: a scale set after
import reached one and not the other."""

from __future__ import annotations

import pytest

from pulsarlab.errors import UsageError
from pulsarlab.timeouts import SECONDS, timeout

SCALE_VARIABLE = "PULSARLAB_TIMEOUT_SCALE"


def test_unscaled_by_default(monkeypatch) -> None:
    monkeypatch.delenv(SCALE_VARIABLE, raising=False)
    assert timeout("broker") == SECONDS["broker"] == 180.0
    monkeypatch.setenv(SCALE_VARIABLE, "")
    assert timeout("spark") == 90.0


def test_a_scale_set_after_import_is_obeyed(monkeypatch) -> None:
    monkeypatch.setenv(SCALE_VARIABLE, "2.5")
    assert timeout("stop") == 75.0
    assert timeout("spark") == 225.0


@pytest.mark.parametrize("bad", ["0", "-1", "fast", "inf", "nan"])
def test_a_scale_that_is_no_positive_number_is_a_usage_error(monkeypatch, bad: str) -> None:
    monkeypatch.setenv(SCALE_VARIABLE, bad)
    with pytest.raises(UsageError, match="PULSARLAB_TIMEOUT_SCALE must be a number above 0"):
        timeout("broker")


def test_an_unknown_kind_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="no timeout 'brokers'.*zookeeper, init, bookie, broker"):
        timeout("brokers")
