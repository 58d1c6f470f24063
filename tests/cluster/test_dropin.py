"""Smoke as a drop-in for ``pulsar standalone``: ``pulsarlab up --topology smoke --bind 127.0.0.1``
(through the installed CLI, as a user starts it), then what client libraries' own test suites do
against standalone's URLs, ``pulsar://localhost:6650`` and ``http://localhost:8080``: batched
produce and consume, a schema registered and enforced, readers and seeks, a table view, a dead
letter topic, compaction, and the admin calls such suites make (tenants, namespaces, partitioned
topics, stats, deletion)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pulsar
import pytest
import requests
from pulsar.schema import Integer, JsonSchema, Record, String

from tests.eventually import eventually
from tests.topology_files import builtin_at

pytestmark = pytest.mark.cluster
SERVICE, WEB = "pulsar://localhost:6650", "http://localhost:8080"


class Order(Record):
    id = Integer()
    item = String()


@pytest.fixture(scope="module")
def standalone_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("dropin")
    first, second = os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX", "127.0").split(".")
    ref = builtin_at("smoke", f"{first}.{(int(second) + 30) % 256}", root)  # beside the pooled clusters
    state = root / "state"
    cli = [sys.executable, "-m", "pulsarlab.cli"]
    t0 = time.monotonic()
    up = subprocess.run([*cli, "up", "--topology", str(ref), "--bind", "127.0.0.1", "--state-dir", str(state), "--quiet"],
                        capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "smoke: pulsar://127.0.0.1:6650  http://127.0.0.1:8080" in up.stdout, up.stdout
        print(f"smoke bound to 127.0.0.1 up in {time.monotonic() - t0:.1f}s through the CLI")
        yield
    finally:
        subprocess.run([*cli, "down", "--state-dir", str(state)], capture_output=True, text=True, timeout=300)


@pytest.fixture
def client(standalone_urls) -> Iterator[pulsar.Client]:
    c = pulsar.Client(SERVICE, operation_timeout_seconds=30)
    try:
        yield c
    finally:
        c.close()


def topic(kind: str) -> str:
    return f"persistent://public/default/dropin-{kind}-{uuid.uuid4().hex[:8]}"


def test_batched_produce_and_consume_in_order(client: pulsar.Client) -> None:
    t = topic("batch")
    consumer = client.subscribe(t, "sub")
    producer = client.create_producer(t, batching_enabled=True, batching_max_messages=50, batching_max_publish_delay_ms=10)
    for i in range(200):
        producer.send_async(f"m-{i}".encode(), None)
    producer.flush()
    got = []
    for _ in range(200):
        m = consumer.receive(timeout_millis=10_000)
        got.append(m.data().decode())
        consumer.acknowledge(m)
    assert got == [f"m-{i}" for i in range(200)]
    stats = f"{WEB}/admin/v2/persistent/public/default/{t.rsplit('/', 1)[1]}/stats"

    def no_backlog() -> None:  # acknowledgements are sent in groups: the backlog empties shortly after
        assert requests.get(stats, timeout=10).json()["subscriptions"]["sub"]["msgBacklog"] == 0

    eventually(no_backlog, timeout=30, interval=0.5, what="the subscription's backlog to empty")


def test_a_schema_is_registered_and_enforced(client: pulsar.Client) -> None:
    t = topic("schema")
    producer = client.create_producer(t, schema=JsonSchema(Order))
    consumer = client.subscribe(t, "sub", schema=JsonSchema(Order))
    producer.send(Order(id=7, item="book"))
    m = consumer.receive(timeout_millis=10_000)
    assert (m.value().id, m.value().item) == (7, "book")
    schema = requests.get(f"{WEB}/admin/v2/schemas/public/default/{t.rsplit('/', 1)[1]}/schema", timeout=10).json()
    assert schema["type"] == "JSON"
    with pytest.raises(Exception, match="(?i)incompatible|schema"):
        client.create_producer(t, schema=pulsar.schema.StringSchema())


def test_a_reader_reads_from_the_start_and_a_consumer_seeks_back(client: pulsar.Client) -> None:
    t = topic("seek")
    producer = client.create_producer(t, batching_enabled=False)
    ids = [producer.send(f"r-{i}".encode()) for i in range(10)]
    reader = client.create_reader(t, pulsar.MessageId.earliest)
    assert [reader.read_next(10_000).data().decode() for _ in range(10)] == [f"r-{i}" for i in range(10)]
    consumer = client.subscribe(t, "sub", initial_position=pulsar.InitialPosition.Earliest)
    for _ in range(10):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    consumer.seek(ids[5])
    again = consumer.receive(timeout_millis=10_000).data().decode()
    assert again in ("r-5", "r-6")  # at or just after the message sought, as the client defines it


def test_a_table_view_holds_the_latest_value_per_key(client: pulsar.Client) -> None:
    t = topic("table")
    producer = client.create_producer(t)
    for i in range(3):
        for key in ("a", "b"):
            producer.send(f"{key}{i}".encode(), partition_key=key)
    view = client.create_table_view(t)
    try:
        eventually(lambda: _latest(view, {"a": b"a2", "b": b"b2"}), timeout=30, interval=0.5, what="the table view")
    finally:
        view.close()


def _latest(view, want: dict[str, bytes]) -> None:
    assert {k: view.get(k) for k in want} == want


def test_a_message_negatively_acknowledged_twice_goes_to_the_dead_letter_topic(client: pulsar.Client) -> None:
    t = topic("dlq")
    dlq = f"{t}-DLQ"
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1, dead_letter_topic=dlq)
    consumer = client.subscribe(t, "sub", consumer_type=pulsar.ConsumerType.Shared, dead_letter_policy=policy,
                                negative_ack_redelivery_delay_ms=100)
    dead = client.subscribe(dlq, "dead", initial_position=pulsar.InitialPosition.Earliest)
    client.create_producer(t).send(b"poison")
    for _ in range(2):
        consumer.negative_acknowledge(consumer.receive(timeout_millis=10_000))
    assert dead.receive(timeout_millis=20_000).data() == b"poison"


def test_compaction_keeps_the_last_value_of_each_key(client: pulsar.Client) -> None:
    t = topic("compact")
    name = t.rsplit("/", 1)[1]
    producer = client.create_producer(t, batching_enabled=False)
    for i in range(5):
        producer.send(f"v{i}".encode(), partition_key="k")
    producer.send(b"other", partition_key="j")
    url = f"{WEB}/admin/v2/persistent/public/default/{name}/compaction"
    assert requests.put(url, timeout=10).status_code == 204

    def compacted() -> None:
        assert requests.get(url, timeout=10).json()["status"] == "SUCCESS"

    eventually(compacted, timeout=60, interval=0.5, what="compaction of " + t)
    reader = client.create_reader(t, pulsar.MessageId.earliest, is_read_compacted=True)
    seen = {}
    while reader.has_message_available():
        m = reader.read_next(10_000)
        seen[m.partition_key()] = m.data()
    assert seen == {"k": b"v4", "j": b"other"}


def test_the_admin_calls_client_suites_make() -> None:
    tenant, ns = f"dropin-{uuid.uuid4().hex[:6]}", "ns"
    clusters = requests.get(f"{WEB}/admin/v2/clusters", timeout=10).json()
    assert clusters == ["smoke"]
    assert "public" in requests.get(f"{WEB}/admin/v2/tenants", timeout=10).json()
    assert requests.put(f"{WEB}/admin/v2/tenants/{tenant}", json={"allowedClusters": clusters, "adminRoles": []},
                        timeout=10).status_code == 204
    assert requests.put(f"{WEB}/admin/v2/namespaces/{tenant}/{ns}", timeout=10).status_code == 204
    part = f"{WEB}/admin/v2/persistent/{tenant}/{ns}/parted/partitions"
    assert requests.put(part, json=3, timeout=10).status_code == 204
    assert requests.get(part, timeout=10).json()["partitions"] == 3
    topics = requests.get(f"{WEB}/admin/v2/persistent/{tenant}/{ns}/partitioned", timeout=10).json()
    assert topics == [f"persistent://{tenant}/{ns}/parted"]
    assert requests.delete(part, params={"force": "true"}, timeout=10).status_code == 204
    assert requests.delete(f"{WEB}/admin/v2/namespaces/{tenant}/{ns}", timeout=10).status_code == 204

    def tenant_deleted() -> None:  # right after its last namespace goes the broker may still answer 500
        r = requests.delete(f"{WEB}/admin/v2/tenants/{tenant}", timeout=10)
        assert r.status_code in (204, 404), (r.status_code, r.text)

    eventually(tenant_deleted, timeout=30, interval=1, what=f"tenant {tenant} deleted")
    assert tenant not in requests.get(f"{WEB}/admin/v2/tenants", timeout=10).json()


def test_the_urls_are_the_ones_standalone_answers_on(standalone_urls) -> None:
    ready = requests.get(f"{WEB}/admin/v2/brokers/ready", timeout=10)
    assert ready.status_code == 200
    assert requests.get(f"{WEB}/admin/v2/brokers/smoke", timeout=10).json() == ["127.0.0.1:8080"]
