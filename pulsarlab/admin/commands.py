"""The topology's configuration as the distribution's own commands: the page of ``pulsar-admin``
commands the blog typed by hand, rendered from the same desired state the reconciler applies
(:func:`pulsarlab.admin.reconcile.desired_state`), for places where pulsarlab itself does not run
(the one-shot services of ``compose/*.yml``).

The configure script reads each kind of object once (racks, each cluster's registration, tenants,
each namespace's policies, each cluster's isolation policies) from the admin REST API, the same
documents the ``pulsar-admin`` get commands print, writes only the items that differ with ``pulsar-admin``,
reads everything again and exits 1 naming every item that still differs. A second run writes
nothing. Values are compared as Pulsar prints them (JSON with whitespace removed); lists as sorted
sets, as the reconciler does.
"""

from __future__ import annotations

import json
import shlex

from pulsarlab.admin.reconcile import Item, desired_state
from pulsarlab.classdata import JVM_LOG_ON_STDERR
from pulsarlab.topology import Role, Topology

ADMIN = "pulsar_admin"  # bin/pulsar-admin, through the function of HELPERS
# where the script keeps pulsar-admin's class archive when its environment names one: the first
# call records the JVM's classes there and every later call maps them (a call's JVM start is most
# of its cost; the script calls it only to write, a fresh sync needing seven calls)
CLASS_ARCHIVE_VAR = "PULSARLAB_CLASS_ARCHIVE"

_ARCHIVE = CLASS_ARCHIVE_VAR
_ADMIN_FUNCTION = f"""
pulsar_admin() {{
  local share=
  if [[ -n ${{{_ARCHIVE}:-}} ]]; then  # the JVM's own log goes to stderr: stdout is what the script reads
    share="{' '.join(JVM_LOG_ON_STDERR)}"
    if [[ -s ${_ARCHIVE} ]]; then share+=" -XX:SharedArchiveFile=${_ARCHIVE} -Xshare:auto"
    else share+=" -XX:ArchiveClassesAtExit=${_ARCHIVE} -Xlog:cds*=error:stderr"; fi  # (recording warns of each class it skips)
  fi
  PULSAR_EXTRA_OPTS="${{PULSAR_EXTRA_OPTS:-}} $share" bin/pulsar-admin "$@"
}}"""

# The script's reads: GET over bash's /dev/tcp (HTTP/1.0, so the body ends where the connection
# does), from the first broker of $URL that accepts the connection. A pulsar-admin call is a JVM
# start of seconds, and a pass reads every item: the reads were two thirds of a fresh sync's 47 s
# of configure. http_get PATH [missing_ok]: 200 prints the body; 404 prints nothing, an error
# unless missing_ok; anything else is an error naming the broker and its status line.
_HTTP_GET = r"""
http_get() {
  local hp status line body
  for hp in $(tr ',' ' ' <<<"${URL#*://}"); do
    { exec 3<>"/dev/tcp/${hp%:*}/${hp##*:}"; } 2>/dev/null || continue  # (the group keeps stderr the script's)
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\nAccept: application/json\r\n\r\n' "$1" "$hp" >&3
    IFS= read -r -t 60 status <&3 || status="no answer in 60 s"
    status=${status%$'\r'}
    while IFS= read -r -t 60 line <&3 && [[ -n ${line%$'\r'} ]]; do :; done
    IFS= read -r -d '' -t 60 body <&3 || true
    exec 3<&-
    case $status in
      "HTTP/1."?" 200 "*) printf '%s' "$body"; return 0 ;;
      "HTTP/1."?" 404 "*) [[ ${2:-} == missing_ok ]] && return 0 ;;
    esac
    echo "configure: GET $1 from $hp: $status" >&2
    return 1
  done
  echo "configure: GET $1: no broker of $URL accepts a connection" >&2
  return 1
}"""

# bash helpers of the configure script: j_value KEY DOC, j_list KEY DOC (sorted, comma-joined)
HELPERS = _ADMIN_FUNCTION + _HTTP_GET + r"""
strip() { tr -d ' \n\t\r'; }
j_value() { grep -o "\"$1\":\(\"[^\"]*\"\|[^,}]*\)" <<<"$2" | head -n1 | sed -E "s/^\"$1\"://; s/^\"(.*)\"$/\1/"; }
j_list() { grep -o "\"$1\":\[[^]]*\]" <<<"$2" | head -n1 | sed -E 's/^[^[]*\[//; s/\]$//' | tr ',' '\n' \
           | sed -E 's/^"(.*)"$/\1/' | sed '/^$/d' | LC_ALL=C sort | paste -sd, -; }
differs=()
READ_ONLY=0
check() { # check LABEL GOT WANT: record a difference (and fail) when GOT is not WANT
  if [[ "$2" != "$3" ]]; then differs+=("$1: is '$2', wanted '$3'"); return 1; fi
}
missing() { differs+=("$*: missing"); }
write() { # a change: made on the first pass, only counted on the read-back pass
  ((READ_ONLY)) && return 0
  echo "configure: ${*:4}"
  "$@" || { echo "configure: failed: ${*:4}" >&2; exit 1; }
}
"""


def _admin(url_var: str, *args: str) -> str:
    return " ".join([ADMIN, "--admin-url", f'"${url_var}"', *(shlex.quote(a) for a in args)])


def _write(url_var: str, *args: str) -> str:
    """A pulsar-admin call that changes something (skipped, its item counted as differing, on the read-back pass)."""
    return "write " + _admin(url_var, *args)


def _sorted_csv(values: list[str]) -> str:
    """A list as Pulsar prints it (JSON-escaped strings), sorted and comma-joined, as ``j_list`` gives it."""
    return ",".join(sorted(json.dumps(v)[1:-1] for v in values))


def metadata_init_script(topo: Topology, cluster: str) -> str:
    """``initialize-cluster-metadata`` for one cluster, skipped when its registration exists."""
    args = [
        "--cluster", cluster,
        "--metadata-store", topo.metadata_store_url(cluster),
        "--configuration-metadata-store", topo.configuration_store_url(),
        "--web-service-url", topo.registered_web_url(cluster),
        "--broker-service-url", topo.service_url(cluster),
    ]
    zk = topo.zookeeper_connect()
    return (f"if bin/pulsar zookeeper-shell -server {zk} stat /admin/clusters/{cluster} >/dev/null 2>&1; "
            f"then echo 'cluster {cluster}: metadata already initialized'; "
            f"else exec bin/pulsar initialize-cluster-metadata {' '.join(shlex.quote(a) for a in args)}; fi")


def rack_document(topo: Topology, cluster: str) -> dict[str, dict[str, dict[str, str]]]:
    """One cluster's rack map as Pulsar stores it (``<metadata root>/bookies``): group -> id -> rack."""
    doc: dict[str, dict[str, dict[str, str]]] = {}
    for it in desired_state(topo, cluster, with_shared=False):
        if it.kind == "rack" and it.desired is not None:
            doc.setdefault(it.wanted["group"], {})[it.name] = {"rack": it.wanted["rack"]}
    return doc


def racks_seed_script(topo: Topology) -> str:
    """Write each cluster's rack map into its metadata store before any broker starts (a broker's
    BookKeeper client learns its own region once, at start); ``configure`` later checks it through
    the admin API. The metadata initialisation leaves an empty map node: it is set, not created."""
    zk = topo.zookeeper_connect()
    lines = []
    for c in topo.clusters:
        doc = rack_document(topo, c.name)
        if not doc:
            continue
        path, data = f"{c.metadata_root}/bookies", shlex.quote(json.dumps(doc, separators=(",", ":")))
        shell = f"bin/pulsar zookeeper-shell -server {zk}"
        lines.append(f"{{ {shell} set {path} {data} >/dev/null 2>&1 || {shell} create {path} {data}; }} "
                     f"&& echo 'cluster {c.name}: rack map written'")
    return " && ".join(lines) or "echo 'no racks in this topology'"


def _rack_lines(items: list[Item]) -> list[str]:
    lines = []
    for it in items:
        want = it.wanted["rack"]
        entry = f'$(grep -o {shlex.quote(chr(34) + it.name + chr(34) + ":{[^}]*}")} <<<"$racks" | head -n1)'
        got = f'"$(j_value rack "{entry}" | sed "s#^/##")"'
        fix = _write("URL", "bookies", "set-bookie-rack", "--bookie", it.name, "--hostname", it.name,
                     "--group", it.wanted["group"], "--rack", want)
        lines.append(_check(f"rack {it.name}", got, want) + " || " + fix)
    return lines


def _check(label: str, got: str, want: str) -> str:
    """``check LABEL GOT WANT``: GOT is a bash expression, quoted already; LABEL and WANT are literal."""
    return f"check {shlex.quote(label)} {got} {shlex.quote(want)}"


def _read(var: str, path: str, missing_ok: bool = False) -> str:
    """``var`` set to the whitespace-stripped JSON of ``GET path`` (the REST resource the matching
    ``pulsar-admin`` get command prints); a failed read ends the script."""
    quoted = shlex.quote(path) + (" missing_ok" if missing_ok else "")
    return f"{var}=$(http_get {quoted} | strip) || exit 1"


def _cluster_lines(it: Item) -> list[str]:
    d, label = it.wanted, f"cluster {it.name}"
    return [
        _read("doc", f"/admin/v2/clusters/{it.name}"),
        _check(f"{label} serviceUrl", '"$(j_value serviceUrl "$doc")"', d["serviceUrl"]) + " && "
        + _check(f"{label} brokerServiceUrl", '"$(j_value brokerServiceUrl "$doc")"', d["brokerServiceUrl"]) + " || "
        + _write("URL", "clusters", "update", it.name, "--url", d["serviceUrl"], "--broker-url", d["brokerServiceUrl"]),
    ]


def _tenant_lines(it: Item) -> list[str]:
    clusters = ",".join(it.wanted["allowedClusters"])
    create = _write("URL", "tenants", "create", it.name, "--allowed-clusters", clusters)
    update = _write("URL", "tenants", "update", it.name, "--allowed-clusters", clusters)
    same = _check(f"tenant {it.name} allowedClusters", '"$(j_list allowedClusters "$doc")"',
                  _sorted_csv(it.wanted["allowedClusters"]))
    return [
        _read("doc", f"/admin/v2/tenants/{it.name}", missing_ok=True),
        f'if [[ -z "$doc" ]]; then missing tenant {it.name}; {create}; else {same} || {update}; fi',
    ]


def _namespace_lines(ns: Item, persistence: Item | None, dedup: Item | None = None) -> list[str]:
    clusters = ",".join(ns.wanted["replication_clusters"])
    create = _write("URL", "namespaces", "create", ns.name, "--clusters", clusters)
    lines = [
        _read("doc", f"/admin/v2/namespaces/{ns.name}", missing_ok=True),
        f'if [[ -z "$doc" ]]; then missing namespace {ns.name}; {create}; '
        + _read("doc", f"/admin/v2/namespaces/{ns.name}", missing_ok=True) + "; fi",
        _check(f"namespace {ns.name} replication_clusters", '"$(j_list replication_clusters "$doc")"',
               _sorted_csv(ns.wanted["replication_clusters"]))
        + " || " + _write("URL", "namespaces", "set-clusters", ns.name, "--clusters", clusters),
    ]
    if persistence is not None:
        p = persistence.wanted
        want = f'{p["bookkeeperEnsemble"]}/{p["bookkeeperWriteQuorum"]}/{p["bookkeeperAckQuorum"]}/0.0'
        got = ('"$(j_value bookkeeperEnsemble "$doc")/$(j_value bookkeeperWriteQuorum "$doc")/'
               '$(j_value bookkeeperAckQuorum "$doc")/$(j_value managedLedgerMaxMarkDeleteRate "$doc")"')
        lines.append(
            _check(f"persistence {ns.name} E/Qw/Qa/mark-delete-rate", got, want) + " || "
            + _write("URL", "namespaces", "set-persistence", ns.name, "-e", str(p["bookkeeperEnsemble"]),
                     "-w", str(p["bookkeeperWriteQuorum"]), "-a", str(p["bookkeeperAckQuorum"]), "-r", "0"))
    if dedup is not None:
        on = bool(dedup.wanted["deduplicationEnabled"])
        lines.append(
            _check(f"deduplication {ns.name}", '"$(j_value deduplicationEnabled "$doc")"', "true" if on else "false")
            + " || " + _write("URL", "namespaces", "set-deduplication", ns.name, "--enable" if on else "--disable"))
    return lines


def _isolation_lines(it: Item) -> list[str]:
    d = it.wanted
    params = ",".join(f"{k}={v}" for k, v in d["auto_failover_policy"]["parameters"].items())
    label = f"isolation {it.cluster}/{it.name}"
    got = ('"$(j_list namespaces "$pol");$(j_list primary "$pol");$(j_list secondary "$pol");'
           '$(j_value policy_type "$pol");$(j_value min_limit "$pol");$(j_value usage_threshold "$pol")"')
    want = ";".join([_sorted_csv(d["namespaces"]), _sorted_csv(d["primary"]), _sorted_csv(d["secondary"]),
                     "min_available", d["auto_failover_policy"]["parameters"]["min_limit"],
                     d["auto_failover_policy"]["parameters"]["usage_threshold"]])
    args = ["ns-isolation-policy", "set", it.cluster, it.name, "--namespaces", ",".join(d["namespaces"]),
            "--primary", ",".join(d["primary"])]
    if d["secondary"]:
        args += ["--secondary", ",".join(d["secondary"])]
    args += ["--auto-failover-policy-type", "min_available", "--auto-failover-policy-params", params]
    return [
        _read("pol", f"/admin/v2/clusters/{it.cluster}/namespaceIsolationPolicies/{it.name}", missing_ok=True),
        _check(label, got, want) + " || " + _write("URL", *args),
    ]


def _pass(topo: Topology) -> list[str]:
    """One pass over every item: read, compare, and write what differs."""
    lines: list[str] = []
    first = topo.clusters[0].name
    for c in topo.clusters:
        items = desired_state(topo, c.name, with_shared=c.name == first)
        lines.append(f"URL={shlex.quote(topo.registered_web_url(c.name))}")
        racks = [i for i in items if i.kind == "rack"]
        if racks:
            lines.append(_read("racks", "/admin/v2/bookies/racks-info"))
            lines += _rack_lines(racks)
        for it in items:
            if it.kind == "cluster":
                lines += _cluster_lines(it)
            elif it.kind == "tenant":
                lines += _tenant_lines(it)
            elif it.kind == "namespace":
                pers = next((p for p in items if p.kind == "persistence" and p.name == it.name), None)
                dedup = next((d for d in items if d.kind == "deduplication" and d.name == it.name), None)
                lines += _namespace_lines(it, pers, dedup)
            elif it.kind == "isolation":
                lines += _isolation_lines(it)
    return lines


def configure_script(topo: Topology) -> str:
    """The bash script of the ``configure`` one-shot service: apply, read back, exit 1 on a difference."""
    body = "\n".join(_pass(topo))
    nodes = " ".join(f"{topo.address_of(n)}:{n.port('web')}" for n in topo.nodes_of(Role.BROKER))
    return f"""#!/bin/bash
# Configure topology {topo.name} (rendered by pulsarlab; brokers {nodes}):
# reads over the admin REST API, writes with pulsar-admin.
# Pass 1 writes what differs from the topology; pass 2 only reads and must find nothing to write.
# When pass 1 found nothing differing, it wrote nothing, and its reads were the read-back.
set -uo pipefail
{HELPERS}
apply() {{
{body}
}}
apply
if ((${{#differs[@]}} == 0)); then
  echo "configure: topology {topo.name} already applied: every item read, nothing differed, nothing written"
  exit 0
fi
differs=()
READ_ONLY=1
echo "configure: reading everything back"
apply
if ((${{#differs[@]}})); then
  printf 'configure: the cluster differs from topology {topo.name} after applying:\\n' >&2
  printf '  %s\\n' "${{differs[@]}}" >&2
  exit 1
fi
echo "configure: topology {topo.name} applied and read back"
"""
