"""``compose/*.yml`` without an engine: the files in the repository are exactly what pulsarlab
renders, their configuration merge gives what the docker runtime writes, and the configure
script parses Pulsar's own JSON answers as the reconciler compares them."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from pulsarlab.admin import commands
from pulsarlab.compose_files import MERGE_SCRIPT, compose_file_text
from pulsarlab.render import CONF_FILE, merge_properties, parse_properties, render_node
from pulsarlab.runtime.docker.compose import CONTAINER
from pulsarlab.topology import BUILTIN_DIR, BUILTINS, Role, load, parse
from tests.http_served import QuietHandler, served

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", BUILTINS)
def test_the_committed_compose_file_is_what_pulsarlab_renders(name: str) -> None:
    committed = REPO / "compose" / f"{name}.yml"
    assert committed.is_file(), f"compose/{name}.yml is missing: run 'pulsarlab compose write --out compose'"
    assert committed.read_text() == compose_file_text(load(name), name), (
        f"compose/{name}.yml drifted from its topology or templates: run 'pulsarlab compose write --out compose'")


@pytest.mark.parametrize("name", BUILTINS)
def test_every_node_is_a_service_started_after_what_it_needs(name: str) -> None:
    topo = load(name)
    doc = yaml.safe_load((REPO / "compose" / f"{name}.yml").read_text())
    services = doc["services"]
    assert {n.name for n in topo.nodes} <= set(services)
    assert socket.gethostname() not in (REPO / "compose" / f"{name}.yml").read_text()  # nothing of this machine
    for b in topo.nodes_of(Role.BROKER):
        needs = services[b.name]["depends_on"]
        assert {n.name for n in topo.nodes_of(Role.BOOKIE)} <= set(needs)
    bookies_first = [services[b.name]["depends_on"] for b in topo.nodes_of(Role.BOOKIE)]
    assert any("racks" in d for d in bookies_first)  # racks are in place before any broker's client starts
    assert set(services["configure"]["depends_on"]) == {b.name for b in topo.nodes_of(Role.BROKER)}
    assert "profiles" not in services["prometheus"] and services["grafana"]["profiles"] == ["monitoring"]


def test_the_container_merge_writes_the_keys_the_docker_runtime_writes(tmp_path: Path) -> None:
    base = "# shipped\nclusterName=\nfoo = 1\n#brokerServicePort=6650\nbrokerServicePort=6650\nkeep=me\n"
    topo = load("sync")
    node = topo.node("pulsar1-eu")
    overlay = next(t for p, t in render_node(topo, node, CONTAINER).items() if p.name == CONF_FILE[Role.BROKER])
    (tmp_path / "overlay").write_text(overlay)
    (tmp_path / "conf").write_text(base)
    script = tmp_path / "merge"
    script.write_text(MERGE_SCRIPT)
    for _ in range(2):  # a restarted container merges again: nothing changes
        subprocess.run(["bash", str(script), str(tmp_path / "overlay"), str(tmp_path / "conf")], check=True)
    merged = (tmp_path / "conf").read_text()
    expected = merge_properties(base, parse_properties(overlay), "header")
    assert parse_properties(merged) == parse_properties(expected)
    assert [ln for ln in merged.splitlines() if ln.startswith("#")] == ["# shipped", "#brokerServicePort=6650"]
    assert merged.splitlines()[5] == "keep=me" and merged.count("brokerServicePort=") == 2  # one is the comment


HELPERS_DOC = {  # Pulsar 4.0.8's answers, whitespace as pulsar-admin prints it
    "policy": '{\n  "namespaces" : [ "mytenant/eu" ],\n  "primary" : [ "127\\\\.3\\\\.1\\\\.5(:\\\\d+)?", '
              '"127\\\\.3\\\\.1\\\\.4(:\\\\d+)?" ],\n  "secondary" : [ ".*" ],\n  "auto_failover_policy" : {\n'
              '    "parameters" : {\n      "min_limit" : "1",\n      "usage_threshold" : "100"\n    },\n'
              '    "policy_type" : "min_available"\n  }\n}',
    "racks": '{\n  "eu" : {\n    "127.3.1.2:3181" : {\n      "rack" : "eu/1"\n    }\n  }\n}',
}


def _bash(script: str) -> str:
    return subprocess.run(["bash", "-c", commands.HELPERS + script], capture_output=True, text=True, check=True).stdout


def test_the_configure_script_reads_pulsar_admin_json_as_the_reconciler_compares_it() -> None:
    pol = HELPERS_DOC["policy"]
    got = _bash(f"pol=$(strip <<'EOF'\n{pol}\nEOF\n)\n"
                'echo "$(j_list namespaces "$pol");$(j_list primary "$pol");$(j_value policy_type "$pol");'
                '$(j_value min_limit "$pol")"')
    want = ";".join([commands._sorted_csv(["mytenant/eu"]),
                     commands._sorted_csv([r"127\.3\.1\.4(:\d+)?", r"127\.3\.1\.5(:\d+)?"]), "min_available", "1"])
    assert got.strip() == want
    racks = HELPERS_DOC["racks"]
    got = _bash(f"racks=$(strip <<'EOF'\n{racks}\nEOF\n)\n"
                'j_value rack "$(grep -o \'"127.3.1.2:3181":{[^}]*}\' <<<"$racks")"')
    assert got.strip() == "eu/1"


def test_a_namespace_deduplication_is_checked_against_the_policies_and_written_when_it_differs() -> None:
    """namespaces[].deduplication in the compose configure script: compared with the namespace's
    policies as Pulsar 4.0.8 prints them (the key absent until set), written with pulsar-admin."""
    data = yaml.safe_load((BUILTIN_DIR / "smoke.yaml").read_text())
    data["namespaces"][0]["deduplication"] = True
    script = commands.configure_script(parse(data))
    assert "pulsar_admin --admin-url \"$URL\" namespaces set-deduplication smoke/test --enable" in script
    check = next(line for line in script.splitlines() if "deduplication smoke/test" in line).split(" || ")[0]
    unset = '{\n  "bundles" : {\n    "numBundles" : 4\n  },\n  "deleted" : false\n}'
    on = '{\n  "deleted" : false,\n  "deduplicationEnabled" : true,\n  "schema_auto_update_compatibility_strategy" : "Full"\n}'
    for doc, differs in ((unset, True), (on, False)):
        out = _bash(f"doc=$(strip <<'EOF'\n{doc}\nEOF\n)\n{check} && echo same; printf '%s\\n' \"${{differs[@]}}\"")
        assert ("same" not in out) == differs, out
        assert ("deduplication smoke/test: is '', wanted 'true'" in out) == (doc is unset), out
    assert "set-deduplication" not in commands.configure_script(load("smoke"))  # not set: not touched


@pytest.mark.parametrize("name", BUILTINS)
def test_the_configure_script_is_valid_bash_and_writes_only_through_write(name: str) -> None:
    script = commands.configure_script(load(name))
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    calls = re.findall(rf"(\S+) {commands.ADMIN} --admin-url \"\$URL\" ((?:\S+ ){{1,2}})", script)
    mutating = ("set-bookie-rack", "create", "update", "set-clusters", "set-persistence", "set-deduplication", "set ")
    writes = [(before, verb) for before, verb in calls if any(m in verb for m in mutating)]
    assert writes and all(before == "write" for before, _ in writes), writes
    assert all(before != "write" for before, verb in calls if not any(m in verb for m in mutating))


def test_pulsar_admin_calls_record_a_class_archive_once_then_map_it(tmp_path: Path) -> None:
    """The script's pulsar_admin: without an archive named, bin/pulsar-admin's own options alone;
    with one, the first call records it and every later call maps it, the JVM's log on stderr."""
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "pulsar-admin"  # stands for the distribution's script: prints the options it got
    tool.write_text('#!/bin/bash\necho "$PULSAR_EXTRA_OPTS"\n'  # and writes the archive a recording JVM would
                    'for o in $PULSAR_EXTRA_OPTS; do [[ $o == -XX:ArchiveClassesAtExit=* ]] && echo x > "${o#*=}"; done; true\n')
    tool.chmod(0o755)
    archive = tmp_path / "admin.jsa"

    def opts(env: dict[str, str]) -> str:
        script = commands.HELPERS + 'pulsar_admin tenants list\n'
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path,
                              env={"PATH": os.environ["PATH"], "PULSAR_EXTRA_OPTS": "-Xmx96m", **env}).stdout.strip()

    assert opts({}) == "-Xmx96m"
    first = opts({commands.CLASS_ARCHIVE_VAR: str(archive)})
    assert f"-XX:ArchiveClassesAtExit={archive}" in first and "-Xlog:all=warning:stderr" in first, first
    assert archive.is_file()
    later = opts({commands.CLASS_ARCHIVE_VAR: str(archive)})
    assert f"-XX:SharedArchiveFile={archive} -Xshare:auto" in later and "ArchiveClassesAtExit" not in later, later
    assert later.startswith("-Xmx96m ") and "-Xlog:all=warning:stderr" in later


class _Admin(QuietHandler):
    """Three resources of an admin API: a document, a missing one, and one that fails."""

    def do_GET(self) -> None:
        code, body = {"/admin/v2/tenants/t": (200, b'{"adminRoles" : [ ],\n "allowedClusters" : [ "c" ]}'),
                      "/admin/v2/tenants/gone": (404, b'{"reason":"Tenant does not exist"}')}.get(self.path, (500, b"{}"))
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


def test_the_configure_scripts_reads_go_to_the_first_broker_that_answers_and_name_what_failed() -> None:
    """The script reads over plain HTTP from bash itself: past a broker that refuses connections, a
    document's body as the reconciler compares it; a missing one is nothing where that is allowed
    and an error where it is not; any other answer is an error naming the broker and its status."""
    with served(_Admin) as url:
        hp = url.removeprefix("http://")
        with socket.socket() as closed:  # a port nobody listens on: the first broker of $URL is down
            closed.bind(("127.0.0.1", 0))
            dead = f"127.0.0.1:{closed.getsockname()[1]}"

        def get(*args: str) -> subprocess.CompletedProcess:
            script = "set -uo pipefail\n" + commands.HELPERS + f"URL=http://{dead},{hp}\nhttp_get {' '.join(args)} | strip"
            return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)

        ok = get("/admin/v2/tenants/t")
        assert (ok.returncode, ok.stdout, ok.stderr) == (0, '{"adminRoles":[],"allowedClusters":["c"]}', "")
        assert subprocess.run(["bash", "-c", commands.HELPERS + f'doc={ok.stdout!r}\nj_list allowedClusters "$doc"'],
                              capture_output=True, text=True).stdout.strip() == "c"
        missing = get("/admin/v2/tenants/gone", "missing_ok")
        assert (missing.returncode, missing.stdout) == (0, "")
        for args, status in ((("/admin/v2/tenants/gone",), "404"), (("/admin/v2/other", "missing_ok"), "500")):
            failed = get(*args)
            assert failed.returncode != 0 and failed.stdout == "", failed
            assert failed.stderr.startswith(f"configure: GET {args[0]} from {hp}: HTTP/1.0 {status} "), failed.stderr
    nobody = subprocess.run(["bash", "-c", commands.HELPERS + f"URL=http://{dead}\nhttp_get /admin/v2/tenants/t"],
                            capture_output=True, text=True, timeout=30)
    assert nobody.returncode == 1 and f"no broker of http://{dead} accepts a connection" in nobody.stderr
