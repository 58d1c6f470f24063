#!/usr/bin/env python3
"""Changed broker settings that a running cluster takes without a restart.

Pulsar changes some broker keys at run time (its list: ``GET /admin/v2/brokers/configuration``);
such a value is the cluster's (kept in its metadata store), not one broker's. So a key is set
through the admin API, with no restart, when it is dynamic and every broker of the cluster gets the
same new value; any other change restarts the broker. The rule is :func:`same_everywhere`, which
``pulsarlab up --apply`` follows too. ``deploy.yml`` runs, for a running broker whose files changed::

    dynamic_settings.py read NODE_DIR     # on the broker's host
    dynamic_settings.py plan              # on the controller: every broker's reading on stdin
    dynamic_settings.py set NODE_DIR KEY=VALUE...   # on one broker's host per cluster

``read`` compares the node's ``conf/`` with the copy kept when it last started (``started-conf/``,
see tasks/launch.yml) and asks its broker for the dynamic keys; it prints ``{"changed": {KEY:
VALUE or null}, "others": [FILE...], "dynamic": [KEY...]}`` (``null``: a key removed; ``others``:
changed files other than broker.conf; no copy: ``"changed": null``, a restart). ``plan`` takes
``{"clusters": {HOST: C}, "results": {HOST: RESULT}}`` for every broker, RESULT being its Ansible
result of ``read`` (skipped: its files did not change; failed: it could not say, so it restarts),
and prints ``{"set": {C: {KEY: VALUE}}, "setter": {C: HOST}, "no_restart": [HOST...]}`` (a broker
whose only change is in comments needs no restart either). ``set`` posts each value to the broker
and exits non-zero naming a key it refuses. The broker's address, port, scheme, token and CA come
from its own broker.conf. Standard library only.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CONF = "broker.conf"
STARTED = "started-conf"
TIMEOUT_S = 15.0


def properties(text: str) -> dict[str, str]:
    """``key=value`` lines (a later line wins, as Java's Properties has it); comments and blanks skipped."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def changed_keys(started: dict[str, str], now: dict[str, str]) -> dict[str, str | None]:
    """The keys whose value differs; None for a key that is gone."""
    out: dict[str, str | None] = {k: v for k, v in now.items() if started.get(k) != v}
    out.update({k: None for k in started if k not in now})
    return out


def same_everywhere(changes: list[dict[str, str | None] | None], dynamic: set[str]) -> dict[str, str]:
    """Of the brokers of one cluster (each one's changed keys; None: a broker whose change is not
    known), the keys set at run time: dynamic, and given one new value on every broker."""
    known = [c for c in changes if c is not None]
    if len(known) != len(changes) or not known:
        return {}
    out = {}
    for key in sorted(set().union(*known) & dynamic):
        values = {c.get(key, "\0unchanged") for c in known}
        if len(values) == 1 and None not in values and "\0unchanged" not in values:
            out[key] = str(values.pop())
    return out


def _client(conf: dict[str, str]) -> tuple[str, dict[str, str], ssl.SSLContext | None]:
    """The broker's web URL, the headers its own client token gives, and the TLS context."""
    address = conf.get("advertisedAddress") or conf.get("bindAddress") or "127.0.0.1"
    tls_port = conf.get("webServicePortTls", "")
    if tls_port:
        ca = conf.get("brokerClientTrustCertsFilePath") or conf.get("tlsTrustCertsFilePath") or None
        url, context = f"https://{address}:{tls_port}", ssl.create_default_context(cafile=ca)
    else:
        url, context = f"http://{address}:{conf.get('webServicePort', '8080')}", None
    headers = {}
    params = conf.get("brokerClientAuthenticationParameters", "")
    if conf.get("authenticationEnabled") == "true" and params:
        token = Path(params.removeprefix("file://")).read_text().strip() if params.startswith("file://") else params
        headers["Authorization"] = f"Bearer {token.removeprefix('token:')}"
    return url, headers, context


def _call(conf: dict[str, str], method: str, path: str) -> object:
    url, headers, context = _client(conf)
    req = urllib.request.Request(url + path, method=method, headers=headers, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=context) as resp:
        body = resp.read().decode()
    return json.loads(body) if body.strip() else None


def read(node_dir: Path) -> dict:
    conf_dir, started_dir = node_dir / "conf", node_dir / STARTED
    now = properties((conf_dir / CONF).read_text())
    dynamic = sorted(_call(now, "GET", "/admin/v2/brokers/configuration") or [])  # type: ignore[arg-type]
    if not (started_dir / CONF).is_file():
        return {"changed": None, "others": [], "dynamic": dynamic}
    names = {p.name for d in (conf_dir, started_dir) for p in d.iterdir() if p.is_file()} - {CONF}
    others = sorted(n for n in names if _bytes(conf_dir / n) != _bytes(started_dir / n))
    return {"changed": changed_keys(properties((started_dir / CONF).read_text()), now), "others": others, "dynamic": dynamic}


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def plan(brokers: dict[str, dict]) -> dict:
    """Per cluster, the keys to set and the broker to set them through, and the brokers left
    without a reason to restart. ``brokers``: every broker, ``{"cluster": C, "reading": R}`` with
    ``R`` what ``read`` printed, or null for a broker whose files did not change."""
    out: dict = {"set": {}, "setter": {}, "no_restart": []}
    for cluster in sorted({b["cluster"] for b in brokers.values()}):
        hosts = sorted(h for h, b in brokers.items() if b["cluster"] == cluster)
        readings = {h: brokers[h]["reading"] for h in hosts}
        read = [r for r in readings.values() if r is not None]
        if not read:
            continue
        dynamic = set.intersection(*(set(r["dynamic"]) for r in read))
        values = same_everywhere([r["changed"] if r is not None else {} for r in readings.values()], dynamic)
        if values:
            out["set"][cluster] = values
            out["setter"][cluster] = next(h for h, r in readings.items() if r is not None)
        out["no_restart"] += [h for h, r in readings.items() if r is not None and r["changed"] is not None
                              and not r["others"] and set(r["changed"]) <= set(values)]
    return out


def readings(clusters: dict[str, str], results: dict[str, dict]) -> dict[str, dict]:
    """:func:`plan`'s input from the Ansible results of ``read`` (see the module's text)."""
    out = {}
    for host, cluster in clusters.items():
        result = results.get(host) or {}
        if result.get("skipped"):
            reading = None
        elif result.get("rc") == 0:
            reading = json.loads(result["stdout"])
        else:
            reading = {"changed": None, "others": [], "dynamic": []}
        out[host] = {"cluster": cluster, "reading": reading}
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["read"] and len(argv) == 2:
        print(json.dumps(read(Path(argv[1]))))
        return 0
    if argv == ["plan"]:
        given = json.load(sys.stdin)
        print(json.dumps(plan(readings(given["clusters"], given["results"]))))
        return 0
    if argv[:1] == ["set"] and len(argv) >= 3:
        conf = properties((Path(argv[1]) / "conf" / CONF).read_text())
        for pair in argv[2:]:
            key, value = pair.split("=", 1)
            try:
                _call(conf, "POST", f"/admin/v2/brokers/configuration/{key}/{urllib.parse.quote(value, safe='')}")
            except urllib.error.HTTPError as exc:
                print(f"the broker refused {key}={value}: HTTP {exc.code} {exc.read().decode(errors='replace')[:300]}",
                      file=sys.stderr)
                return 1
            print(f"{key}={value}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
