"""What each command does, as plain functions the CLI and the tests call."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import yaml

from pulsarlab import distribution, settings, urls
from pulsarlab import render as rendering
from pulsarlab.admin import metrics, placement, racks, reconcile, replication
from pulsarlab.admin.client import admin_of
from pulsarlab.admin.reconcile import Report
from pulsarlab.chaos.actions import Fault, check, run_fault
from pulsarlab.chaos.network import NETWORK_ACTIONS
from pulsarlab.chaos.schedule import Scheduler, Step
from pulsarlab.deployment import Endpoints, NodeControl, Say, UpResult
from pulsarlab.errors import PulsarlabError, StateError, UsageError, yaml_problem
from pulsarlab.history.manifest import new_run_id
from pulsarlab.monitoring import service as monitoring
from pulsarlab.progress import NO_PROGRESS, Reporter, reporter_of
from pulsarlab.runtime import ATTACHED, RUNTIMES, new_deployment, open_deployment, startable
from pulsarlab.runtime.external import ExternalCluster
from pulsarlab.runtime.roundtrip import roundtrip
from pulsarlab.runtime.state import ClusterState, known_state_dirs
from pulsarlab.settings_catalog import check_topology, needs_catalog
from pulsarlab.timeouts import timeout
from pulsarlab.topology import (
    Role,
    Security,
    Topology,
    bound_to,
    cluster_namespace,
    load,
    namespace_of,
    topic_cluster,
    topic_clusters,
    topic_namespace,
)
from pulsarlab.upgrade import fault as _upgrade_fault  # noqa: F401 - registers the 'upgrade' fault
from pulsarlab.workload.audit import audit_subscription
from pulsarlab.workload.run import Target, Workload, WorkloadConfig, WorkloadResult, failover_problem

__all__ = ["RUNTIMES", "WorkloadConfig"]


def _quiet(_msg: str) -> None:
    pass


def known_clusters() -> list[dict]:
    """Every cluster pulsarlab started or attached on this machine (as ``ls`` shows it): name,
    runtime, topology, state folder, how many of its nodes run; or why its state cannot be read."""
    rows: list[dict] = []
    for folder in known_state_dirs():
        row: dict = {"state_dir": str(folder)}
        try:
            cluster = open_deployment(folder)
            alive = [n.name for n in cluster.topo.nodes if cluster.alive(n.name)]
            state = ClusterState.load(folder)
            row.update(name=cluster.topo.name, runtime=cluster.runtime, topology=state.topology_ref if state else None,
                       nodes=len(cluster.topo.nodes), running=len(alive), error=None)
        except PulsarlabError as exc:
            if not ClusterState.path(folder).is_file():
                continue  # taken down while it was listed (its state goes last): gone, not unreadable
            row.update(name=None, runtime=None, topology=None, nodes=None, running=None, error=str(exc).splitlines()[0])
        rows.append(row)
    return rows


def find_state_dir(state_dir: Path | None) -> Path:
    """The state directory to act on: given, else ``PULSARLAB_STATE_DIR``, else the only cluster under ``.pulsarlab/``."""
    state_dir = state_dir or settings.current().state_dir
    if state_dir is not None:
        return state_dir
    found = sorted(p.parent for p in settings.STATE_ROOT.glob("*/state.json"))
    if not found:
        raise StateError("no pulsarlab cluster here (.pulsarlab/ is empty): run 'pulsarlab up' first")
    if len(found) > 1:
        raise StateError(f"several clusters here ({', '.join(p.name for p in found)}): pass --state-dir")
    return found[0]


def _runtime_options(runtime: str, image: str | None, build: bool = True) -> dict[str, str | bool]:
    """Options only some runtimes take: ``image`` and ``build`` (of its own image, when missing)
    are the docker runtime's."""
    startable(runtime)  # an unknown name, or one that only attaches: a usage error naming the others
    if runtime != "docker":
        if image is not None or not build:
            raise UsageError(f"{'--image' if image is not None else '--no-build'} is for the docker runtime "
                             f"(asked for the {runtime!r} runtime)")
        return {}
    return {"build": build} | ({"image": image} if image is not None else {})


def render_topology(
    topology: str, out_dir: Path, runtime: str = "local", dist: str | None = None, image: str | None = None,
    secure: bool = False, warn: Say = _quiet,
) -> list[Path]:
    """Every node's configuration, for ``runtime``: local or docker (paths as that runtime runs
    them; docker adds the compose file), or ansible (an inventory and each host's files). The
    topology's settings are checked against the distribution first (``warn``: what is only warned of)."""
    if runtime != "ansible":
        _runtime_options(runtime, image)
    elif image is not None:
        raise UsageError("--image is for the docker runtime (asked for ansible)")
    topo = load_topology(topology, secure, loopback=runtime != "ansible")  # Ansible's hosts are real machines
    # hosts get every shipped default too (the distribution's conf/ as the base), from the distribution they install;
    # a topology's own settings are checked against the distribution's (before anything is written)
    version = topo.pulsar_version or distribution.DEFAULT_VERSION  # the topology's release, if it names one
    resolved = distribution.resolve(dist, version=version) if dist or runtime == "ansible" or needs_catalog(topo) else None
    if resolved:
        check_topology(topo, resolved.home, resolved.version, warn)
    base = resolved.conf if resolved and (dist or runtime == "ansible") else None
    if runtime == "ansible":
        from pulsarlab.ansible.inventory import render_ansible

        artifact = Path(dist).expanduser().resolve() if dist and Path(dist).is_file() else None
        assert resolved is not None  # resolved above for every ansible render
        return render_ansible(topo, out_dir, resolved.version, base, artifact)
    if runtime == "docker":  # the nodes' configuration with container paths, plus the compose file
        from pulsarlab.runtime.docker.compose import render_compose
        from pulsarlab.runtime.docker.image import default_tag

        tag = image or default_tag(resolved.version if resolved else version)
        return render_compose(topo, out_dir, tag, base)
    return rendering.render(topo, out_dir, base)


def e2e_check(cluster: Endpoints) -> None:
    """Every cluster passes a real produce-and-consume, in the topology's first namespace on it.

    Not ``public/default``: once isolation policies make every broker a primary of some namespace
    (as in ``sync``), Pulsar has no shared broker left for namespaces without a policy."""
    topo = cluster.topo
    progress = reporter_of(cluster.say)
    for c in topo.clusters:
        topic = default_topic(cluster, c.name, "ready")
        with progress.step(f"e2e-{c.name}", f"cluster {c.name}: a message through {topic}", "producing and consuming",
                           "produced and consumed"):
            roundtrip(c.name, topo.service_url(c.name), timeout("e2e"), topic=topic,
                      auth=cluster.client_auth())


def up(
    topology: str, runtime: str = "local", state_dir: Path | None = None, dist: str | None = None, say: Say = _quiet,
    apply: bool = True, image: str | None = None, secure: bool = False, bind: str | None = None, build: bool = True,
    pulsar_version: str | None = None,
    warn: Say | None = None,
) -> tuple[UpResult, NodeControl]:
    """Bring the topology up. On a cluster already running, nothing starts; its differences from
    the topology are fixed if ``apply``, else only reported (``result.drift``). ``image``: the
    docker runtime's Pulsar image (default: the one ``pulsarlab image build`` makes). ``secure``:
    the secure profile's defaults for a topology without a ``security:`` section. ``bind``: the
    one broker's address (:func:`pulsarlab.topology.bound_to`). ``pulsar_version``: the release to
    run (default: the topology's ``pulsar_version``, else a re-run's recorded one, else pulsarlab's).
    The topology's settings are checked against that distribution before anything starts (``warn``:
    what is only warned of; default ``say``)."""
    options = _runtime_options(runtime, image, build)
    topo = load_topology(topology, secure)
    if bind is not None:
        topo = bound_to(topo, bind)
    state_dir = state_dir or settings.current().cluster_dir(topo.name)
    cluster = node_control(new_deployment(topo, state_dir, runtime, say, **options), f"up on the {runtime} runtime")
    previous = ClusterState.load(state_dir)
    if previous is not None and all(cluster.alive(n.name) for n in topo.nodes):
        result = cluster.up()  # reports "already running" without touching anything (or refuses another runtime's)
        asked = pulsar_version or topo.pulsar_version
        if asked and previous.version and asked != previous.version:
            say(f"the running deployment is on Pulsar {previous.version}, not {asked}: "
                f"'pulsarlab upgrade --to {asked}' moves it")
        result.settings = _settings_rollout(cluster, state_dir, apply, say, warn or (lambda text: say(f"warning: {text}")))
        report = configure_cluster(cluster, dry_run=not apply, say=say)
        result.drift, result.drift_fixed = report.changes, apply
        return result, cluster
    version = pulsar_version or topo.pulsar_version or (previous.version if previous else "") or distribution.DEFAULT_VERSION
    resolved = distribution.resolve(dist, version=version, progress=reporter_of(say))
    say(f"Pulsar {resolved.version} from {resolved.home} (Java {resolved.java.major})")
    # refused before anything starts
    check_topology(topo, resolved.home, resolved.version, warn or (lambda text: say(f"warning: {text}")))
    cluster = node_control(new_deployment(topo, state_dir, runtime, say, dist=resolved, **options), "up")
    # the rack map goes into the metadata store before any broker starts, so every broker starts
    # knowing its region (none needs a restart) and all of them start at once; configure runs as
    # soon as one broker of each cluster is ready (other nodes may still be starting), the brokers'
    # regions are checked and the first message sent once all are
    configured: list[bool] = []

    def configure_early(c: NodeControl) -> None:
        configure_cluster(c, say=c.say, brokers=False)
        configured.append(True)

    def check(c: NodeControl) -> None:
        if configured:
            reconcile.settle_brokers(c, c.say)
        else:
            configure_cluster(c, say=c.say)
        e2e_check(c)

    return cluster.up(check=check, before_brokers=seed_racks, brokers_ready=configure_early), cluster


def _settings_rollout(cluster: NodeControl, state_dir: Path, apply: bool, say: Say, warn: Say):
    """A running deployment's settings against the topology it was given now: the plan per node,
    and with ``apply`` the rollout (dynamic broker keys, then gated restarts one node at a time);
    None when nothing differs."""
    from pulsarlab.deployment import Upgradable
    from pulsarlab.upgrade import rollout

    recorded = state_dir / "topology.yaml"
    if not recorded.is_file():
        return None
    old = load_topology(str(recorded))
    changes = rollout.node_changes(old, cluster.topo, cluster.distribution().conf)
    if not changes:
        return None
    dist = cluster.distribution()
    check_topology(cluster.topo, dist.home, dist.version, warn)  # refused before any node is touched
    if not isinstance(cluster, Upgradable):
        raise UsageError(f"the settings of {cluster.topo.name!r} changed, and the {cluster.runtime} runtime cannot "
                         "restart its nodes from here: hosts take new settings through playbooks/deploy.yml")
    rollout.mark_dynamic(cluster.topo, changes, rollout.dynamic_keys(cluster))
    if not apply:
        return rollout.RolloutResult(changes, applied=False)
    return rollout.roll_out(cluster, changes, reporter_of(say))


def attach(topology: str, state_dir: Path | None, wait: float | None = None, compose_project: str | None = None,
           inventory: Path | None = None, playbooks: Path | None = None) -> tuple[str, Path, list[str], str]:
    """Attach to a cluster pulsarlab did not start, at the topology's addresses: (topology name,
    state directory, the nodes that answered, how pulsarlab controls its nodes). With
    ``inventory``, its nodes run on the hosts of that Ansible inventory and pulsarlab acts on them
    through ``playbooks``' node.yml. Otherwise, when a Compose project on the Docker engine runs its
    nodes (``compose_project``, or the only one found), pulsarlab acts on them through it; else it
    has no node control, and says why."""
    from pulsarlab.runtime.docker.attached import ComposeAttached, find_project
    from pulsarlab.runtime.hosts import AnsibleHosts, Inventory

    if inventory is not None and compose_project is not None:
        raise UsageError("--inventory (Ansible hosts) and --compose-project (containers) name two ways to reach "
                         "the nodes: pass one")
    if playbooks is not None and inventory is None:
        raise UsageError("--playbooks goes with --inventory (the playbooks that act on its hosts)")
    topo = load(topology, loopback=inventory is None)  # the hosts of an inventory are machines of their own
    state_dir = state_dir or settings.current().cluster_dir(topo.name)
    previous = ClusterState.load(state_dir)
    if previous is not None and previous.runtime not in ATTACHED:
        raise UsageError(f"{state_dir} holds a cluster pulsarlab started ({previous.runtime} runtime): "
                         "choose another --state-dir")
    hosts = Inventory.checked(topo, inventory, playbooks) if inventory is not None else None  # before anything is written
    nodes = ExternalCluster(topo, state_dir).attach(wait)
    if hosts is not None:
        AnsibleHosts(topo, state_dir).record(hosts)
        return topo.name, state_dir, nodes, f"node control through Ansible ({hosts.path}, {hosts.playbooks / 'node.yml'})"
    found = find_project(topo, project=compose_project)
    if found.project is None:
        if compose_project is not None:  # asked for: its absence is an error, and nothing stays attached
            ExternalCluster(topo, state_dir).down()
            raise UsageError(f"--compose-project {compose_project}: {found.why}")
        return topo.name, state_dir, nodes, f"no node control ({found.why})"
    ComposeAttached(topo, state_dir).record(found)
    return topo.name, state_dir, nodes, f"node control through Compose project {found.project} ({found.host})"


def seed_racks(cluster: Endpoints) -> None:
    """Write the topology's rack map into the metadata store (before the brokers start)."""
    with reporter_of(cluster.say).step("racks", "rack map into the metadata store", "writing", "written"):
        racks.write_rack_maps(cluster)


def explain_node(topology: str, node: str, dist: str | None = None, secure: bool = False,
                 warn: Say = _quiet) -> list[rendering.Explained]:
    """Each effective value of ``node`` and its origin (``render --explain``), the topology's
    settings checked against the distribution (its shipped files are the defaults shown)."""
    topo = load_topology(topology, secure)
    try:
        target = topo.node(node)
    except KeyError:
        raise UsageError(f"no node {node!r} in {topo.name} (nodes: {', '.join(n.name for n in topo.nodes)})") from None
    resolved = distribution.resolve(dist)
    check_topology(topo, resolved.home, resolved.version, warn)
    return rendering.explain_node(topo, target, resolved.conf)


def check_settings(topo: Topology, dist: str | None = None, warn: Say = _quiet) -> None:
    """When ``topo`` sets server settings, check them against the distribution (``validate``)."""
    if needs_catalog(topo):
        resolved = distribution.resolve(dist)
        check_topology(topo, resolved.home, resolved.version, warn)


def load_topology(topology: str, secure: bool = False, loopback: bool = True) -> Topology:
    """A topology by name or file; with ``secure``, the secure profile on (its defaults unless the
    topology has a ``security:`` section of its own); ``loopback=False`` for real hosts' addresses."""
    topo = load(topology, loopback)
    if secure and topo.security is None:
        topo.security = Security()
    if topo.security is None and (granted := [ns.name for ns in topo.namespaces if ns.grants]):
        raise UsageError(f"{topology}: namespaces {', '.join(granted)} grant roles actions, which only a secure "
                         "cluster enforces: add a 'security:' section, or run with --secure")
    if topo.security is not None:  # the operator's certificates and keys, before anything is written
        from pulsarlab.security import own  # cryptography: loaded for a secure topology only

        own.check(topo)
    return topo


def configure_cluster(cluster: Endpoints, dry_run: bool = False, say: Say = _quiet, brokers: bool = True) -> Report:
    progress = reporter_of(say)
    what = "reading the desired state back" if dry_run else "applying the desired state"
    with progress.step("configure", "configure over the admin REST API", what, "compared" if dry_run else "configured"):
        report = reconcile.configure(cluster, dry_run, progress, brokers)
    if report.changes:
        say(f"configure: {len(report.changes)} difference(s) {'found' if dry_run else 'fixed'} "
            f"in {report.seconds:.1f}s" + (f", restarted {', '.join(report.restarted)}" if report.restarted else ""))
    return report


def configure(state_dir: Path | None, dry_run: bool = False, say: Say = _quiet) -> Report:
    """Reconcile the running cluster with its topology over the admin REST API."""
    return configure_cluster(open_cluster(state_dir, say), dry_run, say)


def inspect_placement(state_dir: Path | None, topic: str | None = None) -> placement.PlacementReport:
    return placement.inspect(open_cluster(state_dir), topic)


def inspect_replication(state_dir: Path | None, topic: str | None = None) -> replication.ReplicationReport:
    return replication.inspect(open_cluster(state_dir), topic)


def replication_absent(state_dir: Path | None) -> str:
    """Why ``inspect replication`` has nothing to show."""
    topo = open_cluster(state_dir).topo
    if not replication.replicated_namespaces(topo):
        return f"topology {topo.name!r} replicates no namespace: nothing to show"
    return "no topic of a replicated namespace yet"


def inspect_bookies(state_dir: Path | None) -> tuple[list[metrics.BookieCounters], list[str]]:
    """The counters of every running bookie, and the bookies that are not running (none to read)."""
    cluster = open_cluster(state_dir)
    down = [b.name for b in cluster.topo.nodes_of(Role.BOOKIE) if not cluster.alive(b.name)]
    return metrics.snapshot(cluster), down


def open_cluster(state_dir: Path | None, say: Say = _quiet) -> Endpoints:
    return open_deployment(find_state_dir(state_dir), say=say)


def node_control(cluster: Endpoints, what: str) -> NodeControl:
    """The deployment, as one whose nodes pulsarlab controls; a usage error (exit 2), before
    anything runs, when its runtime cannot act on nodes (a cluster pulsarlab only attached to)."""
    if not isinstance(cluster, NodeControl):
        raise UsageError(f"cannot {what}: cluster {cluster.topo.name!r} was attached, not started, by pulsarlab, and "
                         f"no Compose project of its nodes was found then (the {cluster.runtime} runtime has no node "
                         "control); control its nodes where they were started, or attach again with "
                         "--compose-project NAME if a Compose project runs them")
    return cluster


def open_control(state_dir: Path | None, what: str, say: Say = _quiet) -> NodeControl:
    """The recorded deployment, for a command that acts on its nodes (see :func:`node_control`)."""
    return node_control(open_cluster(state_dir, say), what)


def status(state_dir: Path | None) -> dict:
    cluster = open_cluster(state_dir)
    topo = cluster.topo
    return {
        "name": topo.name,
        "runtime": cluster.runtime,
        "state_dir": str(cluster.state_dir),
        "pulsar_version": cluster.pulsar_version(),
        "upgrading_to": state.upgrading_to if (state := ClusterState.load(cluster.state_dir)) else "",
        "nodes": [asdict(n) for n in cluster.status()],
        "clusters": [
            {"name": c.name, "service_url": topo.service_url(c.name), "web_url": topo.web_url(c.name),
             **({"plain_service_url": plain, "plain_web_url": topo.plain_web_url(c.name)}
                if (plain := topo.plain_service_url(c.name)) else {})}
            for c in topo.clusters
        ],
        "prometheus_url": monitoring.url(cluster),
    }


@dataclass(frozen=True)
class Down:
    """What ``down`` did: the nodes it stopped, or, for a cluster it only attached to, that it
    forgot the attachment and stopped nothing (the runtime that started the nodes stops them)."""

    stopped: list[str]
    detached: str | None = None  # the attached runtime (external, compose, ansible)


def down(state_dir: Path | None, keep_data: bool = False, say: Say = _quiet) -> Down | None:
    """What was stopped or detached; None when there is no cluster (not an error: ``down`` is idempotent)."""
    state_dir = state_dir or settings.current().state_dir
    if state_dir is None and not list(settings.STATE_ROOT.glob("*/state.json")):
        return None
    if state_dir is not None and ClusterState.load(state_dir) is None:
        return None
    cluster = open_cluster(state_dir, say)
    monitoring.stop(cluster, clean=not keep_data)
    stopped = cluster.down(keep_data)
    return Down(stopped, cluster.runtime if cluster.runtime in ATTACHED else None)


def env(state_dir: Path | None, cluster_name: str | None = None) -> urls.ClusterEnv:
    """Environment variables naming the running cluster's URLs (writes ``client.conf`` beside its state)."""
    return urls.cluster_env(open_cluster(state_dir), cluster_name)


def chaos_action(state_dir: Path | None, action: str, args: list[str], say: Say = _quiet) -> str:
    """Run one fault action now on the cluster; returns what it did. Bad arguments (an unknown
    node, region or topic) are one :class:`StateError` naming the problem, before anything runs."""
    fault = Fault(0, action, tuple(args))
    cluster = open_control(state_dir, str(fault), say)
    try:
        check(cluster, fault)
    except ValueError as exc:
        raise StateError(str(exc).removeprefix(f"fault {fault}: ")) from None
    return run_fault(cluster, fault).what


def chaos_heal(state_dir: Path | None, say: Say = _quiet) -> str:
    """``chaos heal`` by hand, the cleanup after faults (a pulsarlab that crashed mid-scenario
    included): every packet filter rule of the deployment removed, wherever it is, then every node
    left paused resumed. A scheduled ``heal`` fault removes the rules only."""
    done = chaos_action(state_dir, "heal", [], say)
    cluster = open_control(state_dir, "heal", say)
    paused = [n.name for n in cluster.status() if n.paused]
    for name in paused:
        cluster.resume_node(name)
    return done + (f"; resumed {', '.join(paused)} (left paused)" if paused else "; no node was left paused")


def fault_schedule(state_dir: Path | None, steps: Sequence[Step | str], out: Path, say: Say = _quiet) -> Scheduler:
    """A schedule of faults (or ``AT ACTION ARGS...`` texts) for a workload run into ``out`` (see
    :func:`workload_run`); every fault checked against the running cluster now."""
    try:
        parsed = [Fault.parse(s) if isinstance(s, str) else s for s in steps]
        cluster = open_control(state_dir, "run faults", say)
        if any(isinstance(s, Fault) for s in parsed):
            cluster.preflight(network=any(isinstance(s, Fault) and s.action in NETWORK_ACTIONS for s in parsed))
        return Scheduler(cluster, parsed, history=out, say=say)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def workload_target(
    cluster: Endpoints, cluster_name: str | None, region: str | None, consume_cluster: str | None = None,
    topic: str | None = None,
) -> Target:
    """Producers connect to one cluster, consumers to the same or another; storage is read back on
    every cluster of the topic's namespace (every cluster when the namespace is not the topology's)."""
    topo = cluster.topo
    ns = topic_namespace(topo, topic) if topic else None
    name = cluster_name or (topic_cluster(topo, topic) if topic and ns else topo.clusters[0].name)
    for c in (name, consume_cluster):
        if c is None:
            continue
        try:
            topo.cluster(c)
        except KeyError:
            raise StateError(f"no cluster {c!r} in topology {topo.name!r}") from None
    reads = topic_clusters(topo, topic) if topic else [c.name for c in topo.clusters]
    for c in (name, consume_cluster):
        if c is not None and c not in reads:
            raise StateError(f"{topic} is not on cluster {c}: its namespace lives on {', '.join(reads)}")
    sec = topo.security
    return Target(name, topo.service_url(name), region, {c: topo.service_url(c) for c in reads},
                  {c: topo.web_url(c) for c in reads}, consume_cluster,
                  topo.service_url(consume_cluster) if consume_cluster else None,
                  sorted(reads) if ns is not None and len(reads) > 1 else [],
                  replicated_subscription=ns is not None and ns.replicated_subscriptions,
                  auth=cluster.client_auth(sec.workload_role) if sec else None,
                  admin_auth=cluster.client_auth() if sec else None)


def default_topic(cluster: Endpoints, cluster_name: str, suffix: str) -> str:
    """``pulsarlab-<suffix>`` in the topology's first namespace on that cluster (``public/default``
    may have no broker to own it once isolation policies claim every broker); a workload run's
    suffix is its run id, so each run has a topic of its own."""
    return f"persistent://{cluster_namespace(cluster.topo, cluster_name)}/pulsarlab-{suffix}"


def prepare_topic(cluster: Endpoints, target: Target, cfg: WorkloadConfig) -> None:
    """Create the topic (partitioned if asked) on every cluster it lives on and, if asked, turn
    broker-side deduplication on."""
    for name in [target.cluster, *(c for c in target.read_clusters if c != target.cluster)]:
        admin = admin_of(cluster, name)
        admin.create_topic(cfg.topic, cfg.partitions)
        if cfg.deduplication:
            admin.ensure_deduplication(namespace_of(cfg.topic), True)


def workload_run(
    state_dir: Path | None, cfg: WorkloadConfig, out: Path, cluster_name: str | None = None, region: str | None = None,
    tick=None, consume_cluster: str | None = None, replication_timeout: float = 60.0, progress: Reporter = NO_PROGRESS,
    before_read: Callable[[], object] | None = None, schedule: Scheduler | None = None,
) -> WorkloadResult:
    """Run a workload; ``before_read`` runs once producing is over, before storage is read back.
    A ``schedule`` (writing its faults into ``out``) starts at the first acknowledged send and is
    finished before the read-back, and when the run ends whatever happened."""
    if schedule is not None:
        tick, before_read = _scheduled(schedule, tick, before_read)
    cluster = open_cluster(state_dir)
    target = workload_target(cluster, cluster_name, region, consume_cluster)
    if out.exists() and any(out.iterdir()):
        raise StateError(f"{out} is not empty: every run writes its own history folder")
    run_id = new_run_id()
    if not cfg.topic:
        cfg.topic = default_topic(cluster, target.cluster, run_id)
    target = workload_target(cluster, cluster_name, region, consume_cluster, cfg.topic)
    if (problem := failover_problem(cfg, target)) is not None:
        raise UsageError(problem)
    prepare_topic(cluster, target, cfg)
    # clients that fail over produce on every cluster of the topic: each one's replication must catch up
    sources = target.replication if cfg.client_failover else [target.cluster]

    def caught_up() -> None:  # replication has until then to bring every acknowledged message over
        if target.replication:
            for source in sources:
                replication.wait_caught_up(cluster, cfg.topic, source, replication_timeout)
        if before_read is not None:
            before_read()

    with contextlib.ExitStack() as audits:
        if schedule is not None:
            audits.callback(schedule.finish)  # whatever happened to the run
        for url in target.read_clusters.values() or [target.service_url]:
            audits.enter_context(audit_subscription(url, cfg.topic, auth=target.auth))
        least = cfg.duration
        if schedule is not None:  # the drivers' deadline: the longest the schedule may keep them sending
            cfg = replace(cfg, duration=schedule.send_bound_s(least))
        workload = Workload(cfg, target, out, cluster.distribution(), run_id)
        if schedule is not None:
            audits.enter_context(schedule.ending(workload.end_sending, least))
        return workload.run(tick, after_send=caught_up if target.replication or before_read else None, progress=progress)


def _history_folder(location: str | Path) -> Path:
    """The folder of a history location on this machine (absolute), or a usage error naming it: a
    scheme Arrow cannot open, a store it cannot reach, or a history not on a file system here."""
    from pulsarlab.history import not_a_history
    from pulsarlab.history.location import LocationError, check_folder, is_local, local_path

    if not is_local(location):  # a LocationError is a usage error: one line, exit code 2
        raise LocationError(check_folder(location) or (
            f"{location}: verify reads a history on this machine's file system (a path or file:// URI); "
            "copy it here first (pyarrow.fs.copy_files), see docs/verify.md"))
    folder = local_path(location)
    if not folder.is_dir():
        raise UsageError(not_a_history(folder) or f"no history folder {folder}")
    return folder


def _scheduled(schedule: Scheduler, tick, before_read: Callable[[], object] | None):
    """``tick`` and ``before_read`` of a run with ``schedule``: it starts at the first acknowledged
    send and is finished before storage is read back."""
    def ticked(c) -> None:
        schedule.on_progress(c)
        if tick is not None:
            tick(c)

    def faults_done() -> None:
        schedule.finish()
        if before_read is not None:
            before_read()

    return ticked, faults_done


def verify_history(
    directories: Sequence[str | Path],
    master: str | None = None,
    expectations: Path | None = None,
    out: Path | None = None,
    *,
    driver_memory: str | None = None,
    executor_python: str | None = None,
    progress: Reporter = NO_PROGRESS,
):
    """Run the PySpark verifier over one or several history folders judged as one (Spark is
    imported only here: it is slow to load). A folder is a path or a URI (``file:///abs``...):
    paths are made absolute here, so the executors find it from any working directory."""
    from pulsarlab.history import not_a_history
    from pulsarlab.verify.model import Expectations

    folders = [_history_folder(d) for d in directories]
    if expectations is not None and not expectations.is_file():
        raise UsageError(f"no expectations file {expectations}")
    try:
        expect = Expectations.load(expectations) if expectations else None
    except yaml.YAMLError as exc:
        raise UsageError(f"expectations file {yaml_problem(expectations, exc)} (not valid YAML)") from None
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"expectations file {expectations}: {first}") from None
    for d in folders:  # before Spark starts: a folder that is no history is a usage error
        if (problem := not_a_history(d)) is not None:
            raise UsageError(problem)
    from pulsarlab.verify import verify  # only now: importing it loads PySpark

    return verify(
        folders, master=master, expect=expect, out=out, driver_memory=driver_memory, executor_python=executor_python,
        progress=progress,
    )


def upgrade(state_dir: Path | None, to: str, say: Say = _quiet, between=None):
    """Move the running deployment to Pulsar ``to`` one node at a time (an older ``to``: a rollback).
    Refused before any node is touched when ``to`` is no release Maven resolves (a usage error) or
    the deployment is not healthy (a node not serving, a ledger under-replicated)."""
    from pulsarlab.deployment import Upgradable
    from pulsarlab.topology.model import PULSAR_VERSION
    from pulsarlab.upgrade.run import upgrade as rolling

    if not PULSAR_VERSION.fullmatch(to):
        raise UsageError(f"--to {to!r} is not a Pulsar release such as 4.0.8")
    cluster = open_control(state_dir, "upgrade", say)
    if not isinstance(cluster, Upgradable):
        raise UsageError(f"cannot upgrade on the {cluster.runtime} runtime from here: pulsarlab upgrades local "
                         "and docker deployments; hosts are upgraded by playbooks/upgrade.yml (docs/runbooks/upgrade.md)")
    try:
        dist = distribution.resolve(version=to, progress=reporter_of(say))
    except PulsarlabError as exc:
        raise UsageError(f"--to {to}: no such release can be resolved, no node touched "
                         f"({str(exc).splitlines()[0].rstrip(':')})") from None
    return rolling(cluster, dist, reporter_of(say), between=between)
