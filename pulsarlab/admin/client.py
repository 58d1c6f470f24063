"""A small client of the Pulsar admin REST API (v2) on top of ``requests``.

Every call has a timeout. Redirects (the owner of a topic or bundle answers ``307``) are followed
here, with the same headers and body and the query string of ``Location`` kept as it is, because
``requests`` drops ``Authorization`` when a redirect changes host. Only safe calls are retried
(GETs, and PUT/POST calls the caller marks idempotent) and only on connection errors and 5xx.
Anything else that is not 2xx raises :class:`AdminError` carrying Pulsar's ``reason``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin

import requests

from pulsarlab.errors import PulsarlabError
from pulsarlab.security import ClientAuth
from pulsarlab.topology import id_address

if TYPE_CHECKING:
    from pulsarlab.deployment import Endpoints

REDIRECTS = (301, 302, 303, 307, 308)
_UNSET: Any = object()


class AdminError(PulsarlabError):
    """A Pulsar admin call failed: method, URL, HTTP status (None: no answer) and Pulsar's reason."""

    def __init__(self, method: str, url: str, status: int | None, reason: str) -> None:
        self.method, self.url, self.status, self.reason = method, url, status, reason
        what = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"admin call {method} {url} failed: {what}: {reason}")


def reason_of(response: requests.Response) -> str:
    """Pulsar's ``{"reason": ...}``, or the start of the body."""
    try:
        body = response.json()
        if isinstance(body, dict) and body.get("reason"):
            return str(body["reason"])
    except ValueError:
        pass
    return response.text.strip()[:300] or response.reason or ""


@dataclass(frozen=True)
class Lookup:
    """Which broker serves a topic."""

    broker_url: str
    http_url: str

    @property
    def broker_id(self) -> str:
        """``host:port`` of the broker's web service, as brokers register."""
        return self.http_url.split("://", 1)[-1].rstrip("/")

    @property
    def host(self) -> str:
        return id_address(self.broker_id)


@dataclass(frozen=True)
class RackEntry:
    """One entry of the bookie rack map."""

    bookie_id: str
    group: str
    rack: str


@dataclass(frozen=True)
class LedgerInfo:
    """A ledger of a topic, with its ensembles (first entry id -> bookie ids)."""

    ledger_id: int
    entries: int
    size: int
    ensembles: dict[int, list[str]] = field(default_factory=dict)
    under_replicated: bool = False
    metadata_seen: bool = False


def encode_topic(topic: str) -> str:
    """``persistent://t/ns/x`` -> ``persistent/t/ns/x`` with the local name URL-encoded."""
    domain, rest = topic.split("://", 1)
    tenant, ns, local = rest.split("/", 2)
    return f"{domain}/{tenant}/{ns}/{quote(local, safe='')}"


def parse_ensembles(metadata: str | None) -> dict[int, list[str]]:
    """The ``ensembles={0=[a:3181, b:3181], 7=[...]}`` part of ``LedgerMetadata.toString``."""
    if not metadata:
        return {}
    start = metadata.find("ensembles={")
    if start < 0:
        return {}
    body, depth, i = [], 0, start + len("ensembles={")
    while i < len(metadata):
        ch = metadata[i]
        if ch == "}" and depth == 0:
            break
        depth += ch == "["
        depth -= ch == "]"
        body.append(ch)
        i += 1
    out: dict[int, list[str]] = {}
    for segment in "".join(body).split("]"):
        if "=[" not in segment:
            continue
        key, bookies = segment.split("=[", 1)
        out[int(key.strip(" ,"))] = [b.strip() for b in bookies.split(",") if b.strip()]
    return out


def admin_of(cluster: Endpoints, name: str, **options: Any) -> AdminClient:
    """An admin client of cluster ``name`` of a deployment, at a broker that answers now, with
    the deployment's admin credentials when it is secure."""
    return AdminClient(cluster.admin_url(name), auth=cluster.client_auth(), **options)


class AdminClient:
    """Calls against one broker's web service URL, e.g. ``http://127.0.1.4:8080``."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 15.0,
        retries: int = 3,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
        max_redirects: int = 5,
        auth: ClientAuth | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_redirects = max_redirects
        self.session = requests.Session()
        self.session.headers.update(headers or {})
        # per call, not on the session: requests lets REQUESTS_CA_BUNDLE override a session's verify
        self.verify: str | bool = True
        if auth is not None:  # a secure cluster: bearer token on every call, the CA verifies the broker
            self.session.headers.update(auth.headers())
            self.verify = auth.verify

    # ----- transport ---------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = _UNSET,
        params: dict[str, Any] | None = None,
        idempotent: bool | None = None,
        ok_statuses: tuple[int, ...] = (),
    ) -> requests.Response:
        """Send one call, following redirects and retrying safe calls; return the 2xx response
        (or one whose status is in ``ok_statuses``); raise :class:`AdminError` otherwise."""
        method = method.upper()
        safe = method in ("GET", "HEAD") if idempotent is None else idempotent
        headers: dict[str, str] = {}
        data: str | None = None
        if body is not _UNSET:
            headers["Content-Type"] = "application/json"
            data = json.dumps(body)
        elif method in ("PUT", "POST"):
            headers["Content-Type"], data = "application/json", ""
        url = self.base_url + path
        attempts = 1 + (self.retries if safe else 0)
        for attempt in range(attempts):
            try:
                r = self._send(method, url, data, headers, params)
            except requests.RequestException as exc:
                if attempt + 1 < attempts:
                    time.sleep(self.backoff * 2**attempt)
                    continue
                raise AdminError(method, url, None, f"{type(exc).__name__}: {exc}") from None
            if r.status_code >= 500 and attempt + 1 < attempts:
                time.sleep(self.backoff * 2**attempt)
                continue
            if r.ok or r.status_code in ok_statuses:
                return r
            raise AdminError(method, r.url, r.status_code, reason_of(r))
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(
        self, method: str, url: str, data: str | None, headers: dict[str, str], params: dict[str, Any] | None
    ) -> requests.Response:
        for _ in range(self.max_redirects + 1):
            r = self.session.request(
                method, url, data=data, params=params, headers=headers, timeout=self.timeout, allow_redirects=False,
                verify=self.verify,
            )
            location = r.headers.get("Location")
            if r.status_code not in REDIRECTS or not location:
                return r
            url, params = urljoin(r.url, location), None  # the Location carries its own query string
        raise AdminError(method, url, r.status_code, f"more than {self.max_redirects} redirects")

    def get_json(self, path: str, *, params: dict[str, Any] | None = None, missing: tuple[int, ...] = ()) -> Any:
        """GET and decode; ``None`` for an empty body or a status listed in ``missing``."""
        r = self.request("GET", path, params=params, ok_statuses=missing)
        if r.status_code in missing or not r.content:
            return None
        return r.json()

    # ----- brokers and bookies -----------------------------------------------------------------
    def version(self) -> str:
        return self.request("GET", "/admin/v2/brokers/version").text.strip()

    def active_brokers(self, cluster: str) -> list[str]:
        return sorted(self.get_json(f"/admin/v2/brokers/{cluster}") or [])

    def registered_bookies(self) -> list[str]:
        data = self.get_json("/admin/v2/bookies/all") or {}
        return sorted(b["bookieId"] for b in data.get("bookies", []))

    def racks(self) -> dict[str, RackEntry]:
        """The rack map, by bookie id."""
        data = self.get_json("/admin/v2/bookies/racks-info") or {}
        return {
            bookie: RackEntry(bookie, group, (info or {}).get("rack") or "")
            for group, bookies in data.items()
            for bookie, info in (bookies or {}).items()
        }

    def set_rack(self, bookie_id: str, group: str, rack: str) -> None:
        self.request(
            "POST", f"/admin/v2/bookies/racks-info/{bookie_id}", params={"group": group}, body={"rack": rack},
            idempotent=True,
        )

    def delete_rack(self, bookie_id: str) -> None:
        self.request("DELETE", f"/admin/v2/bookies/racks-info/{bookie_id}", ok_statuses=(404,))

    # ----- clusters, tenants and namespaces ------------------------------------------------------
    def cluster_data(self, name: str) -> dict[str, Any] | None:
        """A cluster's registration in the configuration store (its URLs...), None if unknown."""
        return self.get_json(f"/admin/v2/clusters/{name}", missing=(404,))

    def put_cluster(self, name: str, data: dict[str, Any], create: bool) -> None:
        if create:
            self.request("PUT", f"/admin/v2/clusters/{name}", body=data, idempotent=True, ok_statuses=(409,))
        else:
            self.request("POST", f"/admin/v2/clusters/{name}", body=data, idempotent=True)

    def tenant(self, name: str) -> dict[str, Any] | None:
        return self.get_json(f"/admin/v2/tenants/{name}", missing=(404,))

    def put_tenant(self, name: str, info: dict[str, Any], create: bool) -> None:
        if create:
            self.request("PUT", f"/admin/v2/tenants/{name}", body=info, idempotent=True, ok_statuses=(409,))
        else:
            self.request("POST", f"/admin/v2/tenants/{name}", body=info, idempotent=True)

    def namespace_policies(self, namespace: str) -> dict[str, Any] | None:
        return self.get_json(f"/admin/v2/namespaces/{namespace}", missing=(404,))

    def create_namespace(self, namespace: str, policies: dict[str, Any]) -> None:
        self.request("PUT", f"/admin/v2/namespaces/{namespace}", body=policies, idempotent=True, ok_statuses=(409,))

    def set_replication(self, namespace: str, clusters: list[str]) -> None:
        self.request("POST", f"/admin/v2/namespaces/{namespace}/replication", body=clusters, idempotent=True)

    def permissions(self, namespace: str) -> dict[str, list[str]] | None:
        """Roles granted on a namespace and their actions (``produce``, ``consume``...); None if no namespace."""
        return self.get_json(f"/admin/v2/namespaces/{namespace}/permissions", missing=(404,))

    def grant(self, namespace: str, role: str, actions: list[str]) -> None:
        """Grant ``role`` the ``actions`` on a namespace (replaces what the role had there)."""
        self.request("POST", f"/admin/v2/namespaces/{namespace}/permissions/{quote(role, safe='')}",
                     body=sorted(actions), idempotent=True)

    def persistence(self, namespace: str) -> dict[str, Any] | None:
        return self.get_json(f"/admin/v2/namespaces/{namespace}/persistence", missing=(404,))

    def set_persistence(self, namespace: str, policy: dict[str, Any]) -> None:
        self.request("POST", f"/admin/v2/namespaces/{namespace}/persistence", body=policy, idempotent=True)

    def namespace_topics(self, namespace: str) -> list[str]:
        return sorted(self.get_json(f"/admin/v2/namespaces/{namespace}/topics", params={"mode": "PERSISTENT"}) or [])

    # ----- isolation -----------------------------------------------------------------------------
    def isolation_policies(self, cluster: str) -> dict[str, dict[str, Any]]:
        """All policies of a cluster; ``{}`` when none was ever set (Pulsar answers 404 then)."""
        path = f"/admin/v2/clusters/{cluster}/namespaceIsolationPolicies"
        r = self.request("GET", path, ok_statuses=(404,))
        if r.status_code == 404:
            if "does not exist" in reason_of(r) and "NamespaceIsolationPolicies" in reason_of(r):
                return {}
            raise AdminError("GET", r.url, 404, reason_of(r))
        return r.json() or {}

    def set_isolation_policy(self, cluster: str, name: str, data: dict[str, Any]) -> None:
        self.request(
            "POST", f"/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/{name}", body=data, idempotent=True
        )

    def isolation_brokers(self, cluster: str) -> list[dict[str, Any]]:
        return self.get_json(f"/admin/v2/clusters/{cluster}/namespaceIsolationPolicies/brokers", missing=(404,)) or []

    # ----- topics --------------------------------------------------------------------------------
    def lookup(self, topic: str) -> Lookup:
        data = self.get_json(f"/lookup/v2/topic/{encode_topic(topic)}")
        # a TLS-only broker answers only the *Tls URLs
        return Lookup(data.get("brokerUrl") or data.get("brokerUrlTls") or "",
                      data.get("httpUrl") or data.get("httpUrlTls") or "")

    def create_topic(self, topic: str, partitions: int = 0) -> None:
        """Create a topic (partitioned when ``partitions`` > 0); an existing one is left as it is."""
        path = f"/admin/v2/{encode_topic(topic)}" + ("/partitions" if partitions else "")
        self.request("PUT", path, body=partitions if partitions else _UNSET, idempotent=True, ok_statuses=(409,))

    def last_message_id(self, topic: str) -> str:
        """The id of the last message stored in a topic (one partition of a partitioned topic), as
        ``(ledger,entry,partition,batch)`` text; entry -1 when the topic holds no message. For a
        batched last entry the batch index is that of the batch's last message."""
        data = self.get_json(f"/admin/v2/{encode_topic(topic)}/lastMessageId") or {}
        try:
            fields = [int(data[k]) for k in ("ledgerId", "entryId")]
        except (KeyError, TypeError, ValueError):
            raise AdminError("GET", f"{self.base_url}/admin/v2/{encode_topic(topic)}/lastMessageId", 200,
                             f"no message id in the answer: {str(data)[:200]}") from None
        fields += [int(data.get("partitionIndex", -1)), int(data.get("batchIndex", -1))]
        return "({})".format(",".join(map(str, fields)))

    def set_deduplication(self, namespace: str, enabled: bool) -> None:
        self.request("POST", f"/admin/v2/namespaces/{namespace}/deduplication", body=enabled, idempotent=True)

    def ensure_deduplication(self, namespace: str, enabled: bool) -> bool:
        """Set the namespace's deduplication only when its policies say otherwise (True: written).
        Every write is a policy change that each broker applies to every loaded topic of the
        namespace, so a workload asking for what is already there changes nothing."""
        if (self.namespace_policies(namespace) or {}).get("deduplicationEnabled") is enabled:
            return False
        self.set_deduplication(namespace, enabled)
        return True

    def unload_namespace(self, namespace: str) -> None:
        """Every bundle of the namespace let go by its owner, to be placed again by the load manager
        (after a failover: back on the isolation policy's primary brokers)."""
        self.request("PUT", f"/admin/v2/namespaces/{namespace}/unload", idempotent=True)

    def unload_topic(self, topic: str) -> None:
        self.request("PUT", f"/admin/v2/{encode_topic(topic)}/unload", idempotent=True)

    def ledgers(self, topic: str) -> list[LedgerInfo]:
        """The topic's ledgers with their ensembles (``internalStats?metadata=true``)."""
        stats = self.get_json(f"/admin/v2/{encode_topic(topic)}/internalStats", params={"metadata": "true"}) or {}
        out = []
        for led in stats.get("ledgers", []):
            meta = led.get("metadata")
            out.append(LedgerInfo(
                ledger_id=int(led["ledgerId"]), entries=int(led.get("entries", 0)), size=int(led.get("size", 0)),
                ensembles=parse_ensembles(meta), under_replicated=bool(led.get("underReplicated", False)),
                metadata_seen=bool(meta),
            ))
        return out
