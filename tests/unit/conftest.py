"""What the unit tests share: one small local Spark session for the verifier's; for every test, a
folder of its own where the state folders it saves are noted for ``pulsarlab ls``."""

from __future__ import annotations

import pytest

from pulsarlab.verify import spark_session


@pytest.fixture(autouse=True)
def own_known_clusters(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's folder is shared with the cluster and docs tiers, whose `pulsarlab ls` would list
    the broken state folders some unit tests save on purpose (and fail on them)."""
    monkeypatch.setenv("PULSARLAB_KNOWN_CLUSTERS", str(tmp_path_factory.mktemp("known")))


@pytest.fixture(scope="session")
def _spark_stopped_at_the_end():  # type: ignore[no-untyped-def]
    yield
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()


@pytest.fixture
def spark(_spark_stopped_at_the_end):  # type: ignore[no-untyped-def]
    """The small local session, asked for anew by each test: the running one when it is that
    session, else a new one. A session object kept for the whole run went stale when a test of the
    session's own rules (tests/unit/test_session.py) stopped it, and every later test of that
    worker that used it failed, depending on which modules the worker had run before."""
    return spark_session("local[2]", shuffle_partitions=2, driver_memory="1g", quick_jit=True)
