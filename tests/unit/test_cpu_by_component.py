"""scripts/cpu-by-component, the CI's account of where the cores went: command lines named as the
components they run, and a table that adds up to what the machine was busy."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "cpu-by-component"


def script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("cpu_by_component", str(SCRIPT))
    spec = importlib.util.spec_from_loader("cpu_by_component", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_command_lines_are_named_by_what_they_run() -> None:
    m = script()
    lib = "-cp /root/.cache/pulsarlab/pulsar/apache-pulsar-4.0.8/lib/* -Dpulsarlab.node=bk1"
    assert m.classify(f"/usr/bin/java {lib} org.apache.bookkeeper.server.Main --conf b.conf") == "pulsar bookie"
    assert m.classify(f"/usr/bin/java {lib} org.apache.pulsar.PulsarBrokerStarter --broker-conf x") == "pulsar broker"
    assert m.classify(f"/usr/bin/java {lib} org.apache.pulsar.zookeeper.ZooKeeperStarter zk.conf") == "pulsar zookeeper"
    assert m.classify("java -Xmx256m -cp driver.jar:lib/* pulsarlab.driver.Driver /tmp/p0.json") == "workload drivers (JVM)"
    assert m.classify("java -cp spark/jars/* org.apache.spark.deploy.SparkSubmit --conf spark.driver.memory=1g "
                      "pyspark-shell") == "spark driver (JVM)"
    assert m.classify("/venv/bin/python3 -m pyspark.daemon") == "spark python workers"
    assert m.classify("/venv/bin/python3 /venv/bin/ansible-playbook -i inventory.yml upgrade.yml") == "ansible"
    pytest = "pytest (controller, workers and the CLI calls they make in-process)"
    assert m.classify("/venv/bin/python -m pytest -n 2") == pytest
    assert m.classify("/venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))") == pytest  # an xdist worker
    assert m.classify("/venv/bin/python -m pulsarlab.cli up --topology smoke") == "pulsarlab CLI"
    assert m.classify("sleep 5") == m.OTHER


def test_the_table_adds_up_to_the_busy_time_with_what_no_sample_saw(tmp_path: Path) -> None:
    m = script()
    out = tmp_path / "cpu.txt"
    tick = m.TICK
    m.write(out, {"pulsar bookie": 300 * tick, "pulsar broker": 100 * tick, "other processes": 0},
            {"pulsar bookie": 3, "pulsar broker": 1}, total=500 * tick, wall=250.0)
    lines = out.read_text().splitlines()
    assert lines[0].startswith("CPU by component over 250 s of wall: 500 CPU-s busy")
    assert [line.split()[0] for line in lines[1:]] == ["300", "100", "100"]
    assert lines[1].endswith("3 procs  pulsar bookie") and "60.0%" in lines[1]
    assert lines[-1].endswith(m.UNSEEN) and "20.0%" in lines[-1]


def test_a_child_no_sample_saw_is_charged_to_its_parent_and_a_seen_one_only_once() -> None:
    m = script()
    accounts = m.Accounts(started_at=1000)
    ansible = m.Proc("10", 900, "1", own=50, children=7)  # started before the sampler: charged from now on
    accounts.step([ansible], {"10": "ansible"})
    assert accounts.charged == {}
    # a fork that lived between two samples: only the parent's reaped time tells of it (30 ticks)
    accounts.step([ansible._replace(own=55, children=37)], {"10": None})
    assert accounts.charged == {"ansible": 5 + 30}
    # a child seen twice (a JVM: 40 ticks, then 100), then gone and reaped with 104 (4 after the last sample)
    child = m.Proc("11", 1100, "10", own=40, children=0)
    accounts.step([ansible._replace(own=55, children=37), child], {"10": None, "11": "pulsar broker"})
    accounts.step([ansible._replace(own=55, children=37), child._replace(own=100)], {"10": None, "11": None})
    accounts.step([ansible._replace(own=56, children=37 + 104)], {"10": None})
    assert accounts.charged == {"ansible": 5 + 30 + 1 + 4, "pulsar broker": 100}
    assert accounts.counted() == {"ansible": 1, "pulsar broker": 1}


def test_a_child_that_goes_with_its_parent_is_not_charged_again_to_the_grandparent() -> None:
    """A script's subshell that ends right after the program it waited for: both go between two
    samples, and the script reaps the subshell with the program's time inside its own."""
    m = script()
    accounts = m.Accounts(started_at=1000)
    shell = m.Proc("20", 1100, "1", own=1, children=0)
    sub = m.Proc("21", 1101, "20", own=0, children=0)
    burner = m.Proc("22", 1102, "21", own=150, children=0)  # seen: 150 ticks charged to it
    accounts.step([shell, sub, burner], {"20": "other processes", "21": "other processes", "22": "other python"})
    accounts.step([shell, sub, burner._replace(own=300)], {"20": None, "21": None, "22": None})
    # the burner (301 at its end) and the subshell (2) are gone; the shell's reaped time shows both
    accounts.step([shell._replace(children=301 + 2)], {"20": None})
    assert accounts.charged == {"other processes": 1 + 1 + 2, "other python": 300}


def test_node_jvms_are_counted_by_the_deployment_that_started_them(tmp_path: Path) -> None:
    m = script()
    state = "/tmp/pytest-of-root/pytest-3/popen-gw1/test_secure0/state"
    line = (f"java -Dpulsarlab.node=bk1 -Dlog4j.configurationFile={state}/nodes/bk1/conf/log4j2.yaml "
            "org.apache.bookkeeper.server.Main")
    assert m.deployment(line) == "test_secure0/state"
    assert m.deployment(line.replace(state, "/home/me/.pulsarlab/sync")) == "/home/me/.pulsarlab/sync"
    assert m.deployment("java -Dpulsarlab.node=bk1 org.apache.bookkeeper.server.Main").startswith("(no state folder")
    accounts = m.Accounts(started_at=1000)
    bk, broker = m.Proc("30", 1100, "1", own=10, children=0), m.Proc("31", 1100, "1", own=20, children=0)
    accounts.step([bk, broker], {"30": "pulsar bookie", "31": "pulsar broker"}, {"30": "a", "31": "a"})
    restarted = m.Proc("32", 1200, "1", own=5, children=0)  # bk1 again, a new JVM of the same deployment
    accounts.step([broker._replace(own=25), restarted], {"31": None, "32": "pulsar bookie"}, {"32": "a"})
    assert accounts.deployments() == [(10 + 25 + 5, 3, "a")]
    out = tmp_path / "cpu.txt"
    m.write(out, accounts.charged, accounts.counted(), total=40, wall=1.0, deployments=accounts.deployments())
    assert out.read_text().splitlines()[-1].split()[2:] == ["3", "JVMs", "a"]
