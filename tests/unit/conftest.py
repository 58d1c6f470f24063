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
def spark():  # type: ignore[no-untyped-def]
    session = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g", quick_jit=True)
    yield session
    session.stop()
