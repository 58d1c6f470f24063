"""Faults during a recorded workload on the real `sync` stretch cluster, judged by the verifier.

The blog's claim, measured on the shared cluster: losing every broker of a region loses no
acknowledged message, and with producer deduplication stores none twice. (Losing a bookie is the
built-in scenario ``sync-bookie-loss``, run on a fresh cluster in test_builtin_scenarios.py.)"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from pulsarlab import ops
from pulsarlab.admin.client import AdminClient
from pulsarlab.chaos.schedule import Fault, FaultSchedule
from pulsarlab.runtime.local import LocalCluster
from pulsarlab.topology import Role
from pulsarlab.verify import Expectations, Verdict, verify
from pulsarlab.workload.run import WorkloadConfig


def owned_in(cluster: LocalCluster, topic: str, region: str, timeout: float = 60) -> None:
    """Make the topic's owner a broker of ``region`` (unloading its namespace so the isolation
    policy places it afresh) before a fault that must hit that region."""
    admin = AdminClient(cluster.admin_url("mycluster"))
    admin.create_topic(topic)
    hosts = {cluster.topo.address_of(b) for b in cluster.topo.nodes_of(Role.BROKER, "mycluster") if b.region == region}
    ns = "/".join(topic.removeprefix("persistent://").split("/")[:2])
    deadline = time.monotonic() + timeout
    while (owner := admin.lookup(topic).host) not in hosts:
        assert time.monotonic() < deadline, f"{topic} stays owned by {owner}, not by a {region} broker"
        admin.request("PUT", f"/admin/v2/namespaces/{ns}/unload", idempotent=True)
        time.sleep(2)


def run_with_faults(cluster: LocalCluster, cfg: WorkloadConfig, faults: list[Fault], out: Path,
                    expect: Expectations | None = None) -> tuple[Verdict, list[str]]:
    schedule = FaultSchedule(cluster, faults).start()
    result = ops.workload_run(cluster.state_dir, cfg, out)
    log = schedule.join()
    assert not log.errors, log.errors
    assert result.counters.acked > 0
    return verify(out, expect=expect), [f"{r.at:.1f}s {r.done}" for r in log.done]


def test_losing_every_eu_broker_fails_over_to_us_without_loss_or_stored_duplicates(sync: LocalCluster, tmp_path: Path) -> None:
    cfg = WorkloadConfig(f"persistent://mytenant/eu/region-loss-{uuid.uuid4().hex[:6]}", producers=1, consumers=1,
                         subscription_type="failover", rate=200, duration=75, deduplication=True)
    faults = [Fault(10, "kill", ("pulsar1-eu", "pulsar2-eu"))]
    # an acknowledgement in flight when its broker dies may be lost, so a delivery can repeat:
    # reported, not forbidden (Pulsar delivers at least once without transactions)
    expect = Expectations.from_mapping({"allow": ["duplicated_delivery"]})
    owned_in(sync, cfg.topic, "eu")
    try:
        verdict, done = run_with_faults(sync, cfg, faults, tmp_path / "run", expect)
    finally:
        for name in ("pulsar1-eu", "pulsar2-eu"):
            sync.start_node(name)
    counts = verdict.counts()
    assert verdict.ok, (counts, verdict.notes, done)
    assert counts["lost"] == 0 and counts["duplicated_in_storage"] == 0 and counts["unexpected"] == 0
    rto = verdict.metrics["longest_gap_without_ack_s"]["seconds"]
    print(f"eu brokers lost: outage {rto:.1f}s, duplicated deliveries {counts['duplicated_delivery']}")
    assert 1 < rto < 50, verdict.metrics  # an outage happened, and the us brokers ended it
