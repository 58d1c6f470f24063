"""What the verifier's unit tests share: one small local Spark session."""

from __future__ import annotations

import pytest

from pulsarlab.verify import spark_session


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    session = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g", quick_jit=True)
    yield session
    session.stop()
