"""The pytest plugin, as a user's project meets it: a throw-away project whose tests send a message
through ``pulsar_cluster`` against a real smoke cluster, and nothing of it left running afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from pulsarlab import ops
from pulsarlab.distribution import DEFAULT_VERSION, cache_root
from tests.eventually import eventually
from tests.interrupt import default_sigint
from tests.topology_files import builtin_at

pytest_plugins = ["pytester"]
OTHER_VERSION = "4.0.6"  # the release .ci/run fetches beside the default

ROOT = Path(__file__).resolve().parents[2]
# pytester gives the inner run a HOME of its own: point it at the distribution this machine has cached
CACHED = {"PULSARLAB_CACHE": str(cache_root()),
          "PULSARLAB_MAVEN_REPO": os.environ.get("PULSARLAB_MAVEN_REPO", str(Path.home() / ".m2" / "repository"))}

USER_TEST = '''
import json, os, time, urllib.request, uuid
from pathlib import Path

import psutil


def test_roundtrip_{n}(pulsar_cluster):
    client = pulsar_cluster.client()
    topic = pulsar_cluster.topic("plugin-" + uuid.uuid4().hex[:8])
    consumer = client.subscribe(topic, "check")
    producer = client.create_producer(topic)
    producer.send(b"hello from a user's test")
    msg = consumer.receive(timeout_millis=30000)
    consumer.acknowledge(msg)
    assert msg.data() == b"hello from a user's test"
    assert set(pulsar_cluster.clusters) == {{"smoke"}}
    assert pulsar_cluster.service_url.startswith("pulsar://") and pulsar_cluster.admin_url.startswith("http://")
    state = str(pulsar_cluster.state_dir)
    node = "-Dpulsar.log.dir=" + state + "/"  # a node JVM of this cluster
    pids = sorted(p.pid for p in psutil.process_iter(["cmdline"]) if any(a.startswith(node) for a in p.info["cmdline"] or []))
    with urllib.request.urlopen(pulsar_cluster.admin_url + "/admin/v2/brokers/version", timeout=30) as answer:
        reported = answer.read().decode().strip().strip('"')  # the broker's own word
    Path("seen-{n}.json").write_text(json.dumps({{"worker": os.environ.get("PYTEST_XDIST_WORKER"), "pids": pids,
                                                 "version": pulsar_cluster.pulsar_version, "reported": reported}}))
'''


@pytest.fixture
def project(pytester: pytest.Pytester, cluster_pool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, list[str]]:
    """A user's project; the shared test cluster is taken down first (one cluster at a time on this machine)."""
    cluster_pool.close()
    # the range this test run may use (set when running beside another cluster), free once the pool is down
    topo = builtin_at("smoke", os.environ.get("PULSARLAB_TEST_ADDRESS_PREFIX", "127.0"), tmp_path)
    state = tmp_path / "state"
    for k, v in CACHED.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the checkout under test, not whichever pulsarlab is installed
    args = ["-p", "pulsarlab.pytest_plugin", "--pulsarlab-topology", str(topo), "--pulsarlab-state-dir", str(state)]
    return state, args


def seen(pytester: pytest.Pytester) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(pytester.path.glob("seen-*.json"))]


def assert_nothing_left(state: Path, pids: set[int]) -> None:
    assert pids, "the user's test saw no node process of the cluster"
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"node processes left running after the session: {alive}"
    assert not (state / "state.json").exists(), "the state directory still records a cluster"


def test_a_users_test_sends_a_message_and_the_cluster_is_gone_after_even_a_failure(pytester: pytest.Pytester, project) -> None:
    """...on the release the run asks for (--pulsarlab-pulsar-version), as its broker reports."""
    state, args = project
    failing = "\n\ndef test_that_fails(pulsar_cluster):\n    assert pulsar_cluster.clusters == {}\n"
    pytester.makepyfile(test_user=USER_TEST.format(n=1) + failing)
    result = pytester.runpytest_subprocess(*args, "--pulsarlab-pulsar-version", OTHER_VERSION, timeout=600)
    result.assert_outcomes(passed=1, failed=1)
    (run,) = seen(pytester)
    assert (run["version"], run["reported"]) == (OTHER_VERSION, OTHER_VERSION), run
    assert_nothing_left(state, set(run["pids"]))


def test_xdist_workers_share_one_cluster(pytester: pytest.Pytester, project) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install pytest-xdist)")
    state, args = project
    pytester.makepyfile(test_a=USER_TEST.format(n=1), test_b=USER_TEST.format(n=2))
    result = pytester.runpytest_subprocess(*args, "-n", "2", timeout=600)
    result.assert_outcomes(passed=2)
    runs = seen(pytester)
    assert len(runs) == 2
    assert runs[0]["pids"] == runs[1]["pids"], "each worker saw a cluster of its own"
    assert_nothing_left(state, set(runs[0]["pids"]))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "cancelled-ci-job"])
def test_an_interrupted_run_takes_its_cluster_down(pytester: pytest.Pytester, project, sig: signal.Signals) -> None:
    state, args = project
    pytester.makepyfile(test_user=USER_TEST.format(n=1) + "    time.sleep(300)\n")  # a test busy until interrupted
    inner = subprocess.Popen([sys.executable, "-m", "pytest", *args, "test_user.py"], cwd=pytester.path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_sigint)
    try:

        def has_a_cluster() -> None:
            if inner.poll() is not None:
                pytest.fail(inner.communicate()[0])
            assert seen(pytester), "the user's test has no cluster yet"

        eventually(has_a_cluster, timeout=300, interval=1, what="the user's test having a cluster")
        inner.send_signal(sig)
        output = inner.communicate(timeout=120)[0]
    finally:
        if inner.poll() is None:
            inner.kill()
    assert "Interrupted" in output or "KeyboardInterrupt" in output, output
    assert_nothing_left(state, set(seen(pytester)[0]["pids"]))


def test_keep_leaves_it_up_and_a_later_run_reuses_it_without_stopping_it(pytester: pytest.Pytester, project) -> None:
    state, args = project
    pytester.makepyfile(test_user=USER_TEST.format(n=1))
    try:
        pytester.runpytest_subprocess(*args, "--pulsarlab-keep", timeout=600).assert_outcomes(passed=1)
        kept = set(seen(pytester)[0]["pids"])
        assert kept and all(psutil.pid_exists(p) for p in kept), "--pulsarlab-keep did not keep the cluster"
        (pytester.path / "seen-1.json").unlink()
        # a run asking for another release than the one up there fails, and leaves it running
        other = pytester.runpytest_subprocess(*args, "--pulsarlab-pulsar-version", OTHER_VERSION, timeout=600)
        other.assert_outcomes(errors=1)
        assert f"runs Pulsar {DEFAULT_VERSION}, not {OTHER_VERSION}" in other.stdout.str(), other.stdout.str()[-3000:]
        assert all(psutil.pid_exists(p) for p in kept) and not seen(pytester)
        pytester.runpytest_subprocess(*args, timeout=600).assert_outcomes(passed=1)
        assert set(seen(pytester)[0]["pids"]) == kept, "the later run started a cluster of its own"
        assert all(psutil.pid_exists(p) for p in kept), "a run stopped a cluster it had not started"
    finally:
        ops.down(state)
    assert_nothing_left(state, kept)
