"""Rehearsal hosts: one container per node of a topology, each a machine of its own.

Every host has its own network namespace and address on a bridge network the lab makes on this
machine (``10.231.N.0/24``: nothing outside it is ever a target), is reached over SSH with a key
pair made for the lab, and has iptables (a rule on one host cuts that host alone, as on real
machines). ``up`` writes, into the lab's folder, the topology at the hosts' addresses, the
Ansible inventory rendered from it (``render --runtime ansible``) and each host's connection
(``host_vars/``), so that ``deploy.yml``, the runbooks, ``configure.yml`` and then every
pulsarlab command act on the hosts the way they act on production: over SSH.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Network, ip_network
from pathlib import Path

import psutil
import yaml
from python_on_whales import DockerClient, DockerException

from pulsarlab import distribution
from pulsarlab.ansible.inventory import render_ansible
from pulsarlab.errors import StateError, UsageError
from pulsarlab.identity import state_digest
from pulsarlab.lab.images import ensure_images
from pulsarlab.progress import NO_PROGRESS, Reporter
from pulsarlab.runtime.docker import engine
from pulsarlab.topology import Topology, load

LAB_FILE = "lab.json"
POOL = IPv4Network("10.231.0.0/16")
FIRST_HOST = 10  # .1 is this machine's side of the bridge (where pulsarlab and the workload connect from)
LABEL = "org.pulsarlab.lab"
SSH_WAIT_S = 90.0
# The lab's Maven mirror: this machine's downloaded server distributions, served read-only over HTTP
# on the lab's network (.2), so that deploy.yml's hosts download them (pulsar_node_maven_mirror) instead of
# the controller pushing 250 MB to each over SSH, whose encryption is CPU the nodes then lack (measured
# on the sync lab: 36 s of deploy.yml and 88 s of upgrade.yml sending it).
MIRROR_HOST = 2
MIRROR_PORT = 8081
MIRROR_ROOT = "/srv/maven"
MIRROR_WAIT_S = 30.0
# The lab's network has no route out, so Docker's resolver inside each host would wait 10 s for an
# upstream that never answers, on every name or address lookup (the JVMs look up the addresses of
# their peers and clients: deploy.yml's bookies sat idle 20 to 30 s each). The hosts' resolver asks
# a port where nothing listens instead: a lookup outside /etc/hosts fails at once, as on this machine
# (deploy.yml on the sync lab: 106 s instead of ~160 s).
RESOLV_CONF = ("# pulsarlab lab: no DNS server on this network; lookups fail at once\n"
               "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
SYSTEMD_RUN = {"envs": {"container": "docker"}, "tmpfs": ["/run", "/run/lock"],
               "volumes": [("/sys/fs/cgroup", "/sys/fs/cgroup", "ro")]}


@dataclass
class Lab:
    """What ``hosts up`` made (``lab.json`` in the lab's folder): enough to remove it all again."""

    folder: str
    docker_host: str
    network: str
    subnet: str
    hosts: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> address, kind, container
    mirror: str = ""  # the URL of the lab's Maven mirror (the distributions this machine downloaded)
    sent: list[str] = field(default_factory=list)  # hosts that get the distribution from the controller over SSH

    @property
    def gateway(self) -> str:
        return str(next(ip_network(self.subnet).hosts()))

    @property
    def mirror_container(self) -> str:
        return f"{self.network}-mirror"

    @property
    def key(self) -> Path:
        return Path(self.folder) / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return Path(self.folder) / "ssh" / "known_hosts"

    def save(self) -> None:
        (Path(self.folder) / LAB_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def read(cls, folder: Path) -> Lab | None:
        path = folder / LAB_FILE
        if not path.is_file():
            return None
        try:
            return cls(**json.loads(path.read_text()))
        except (ValueError, TypeError) as exc:
            raise StateError(f"{path}: not a lab record pulsarlab wrote ({exc}); remove the lab's containers by label "
                             f"{LABEL} and the file") from None


# ----- pure parts -----------------------------------------------------------------------------------
def free_subnet(taken: Iterable[IPv4Network]) -> IPv4Network:
    """The first /24 of the lab's pool that overlaps no network this machine already has."""
    used = list(taken)
    for net in POOL.subnets(new_prefix=24):
        if not any(net.overlaps(u) for u in used):
            return IPv4Network(net)
    raise StateError(f"no free /24 left in {POOL} for a lab network (remove labs with 'pulsarlab hosts down')")


def addresses(topo: Topology, subnet: IPv4Network) -> dict[str, str]:
    """Each node's host address: .10, .11, ... in the topology's order."""
    hosts = list(subnet.hosts())
    if len(topo.nodes) > len(hosts) - FIRST_HOST:
        raise UsageError(f"{len(topo.nodes)} nodes do not fit in {subnet}")
    return {n.name: str(hosts[FIRST_HOST - 1 + i]) for i, n in enumerate(topo.nodes)}


def at_addresses(topo: Topology, where: dict[str, str]) -> Topology:
    """``topo`` with every node at its host's address."""
    data = topo.model_dump(mode="json")
    for node in data["nodes"]:
        node["address"] = where[node["name"]]
    return Topology.model_validate(data)


# AES-GCM first: with the CPU's AES instructions it moves the 300 MB distribution to a host in half
# the time of OpenSSH's default cipher (measured: 0.99 s against 2.11 s), and deploy.yml sends one per host
CIPHERS = "aes128-gcm@openssh.com,chacha20-poly1305@openssh.com"


def ssh_options(lab: Lab) -> list[str]:
    """How every SSH connection to the lab's hosts is made (Ansible's and pulsarlab's own)."""
    return ["-o", f"UserKnownHostsFile={lab.known_hosts}", "-o", "StrictHostKeyChecking=accept-new", "-o", f"Ciphers={CIPHERS}"]


def connection(lab: Lab) -> dict[str, str]:
    """A host's Ansible connection: SSH as root with the lab's key; host keys kept in the lab. The
    lab's images put Debian's python3 at /usr/bin/python3, so Ansible is told so: its discovery
    would otherwise ask every host again at the start of every playbook run (a node action is one)."""
    return {"ansible_connection": "ssh", "ansible_user": "root",
            "ansible_ssh_private_key_file": str(lab.key),
            "ansible_ssh_common_args": " ".join(ssh_options(lab)),
            "ansible_python_interpreter": "/usr/bin/python3"}


def kinds_of(topo: Topology, systemd: list[str], bare: list[str], sent: list[str] | None = None) -> dict[str, str]:
    """Each node's machine kind; ``systemd`` may be ``["all"]``. Unknown names (of ``sent`` too)
    are one usage error."""
    names = [n.name for n in topo.nodes]
    wanted_systemd = names if systemd == ["all"] else systemd
    unknown = sorted({*wanted_systemd, *bare, *(sent or [])} - set(names))
    if unknown:
        raise UsageError(f"no node named {', '.join(unknown)} in {topo.name!r} (nodes: {', '.join(names)})")
    both = sorted(set(wanted_systemd) & set(bare))
    if both:
        raise UsageError(f"{', '.join(both)}: a bare host has no Java and no systemd; name it in --systemd or --bare, not both")
    return {n: "bare" if n in bare else "systemd" if n in wanted_systemd else "plain" for n in names}


def reuse_problem(old: Lab, kinds: dict[str, str]) -> str | None:
    """Why the lab in a folder cannot be completed into the one asked for (``up`` keeps the hosts
    that run, so a host of another kind would stay what it was while the files said otherwise)."""
    if set(old.hosts) != set(kinds):
        return f"other nodes ({', '.join(sorted(old.hosts))})"
    other = [f"{n} is {old.hosts[n]['kind']}, asked {kinds[n]}" for n in kinds if old.hosts[n].get("kind") != kinds[n]]
    return f"hosts of other kinds ({'; '.join(other)})" if other else None


# ----- acting on the engine -------------------------------------------------------------------------
def _taken(docker: DockerClient) -> list[IPv4Network]:
    nets: list[IPv4Network] = []
    for net in docker.network.list():
        for conf in net.ipam.config or []:
            subnet = conf.get("Subnet") if isinstance(conf, dict) else None
            if subnet and ":" not in subnet:
                nets.append(IPv4Network(subnet))
    for addrs in psutil.net_if_addrs().values():  # this machine's own (another engine's bridge, a VPN)
        nets += [IPv4Network(f"{a.address}/{a.netmask}", strict=False) for a in addrs
                 if a.family == socket.AF_INET and a.netmask]
    return nets


def _keypair(folder: Path) -> None:
    key = folder / "ssh" / "id_ed25519"
    if key.is_file():
        return
    if shutil.which("ssh-keygen") is None or shutil.which("ssh") is None:
        raise StateError("the rehearsal hosts are reached over SSH: install the OpenSSH client (apt-get install openssh-client)")
    key.parent.mkdir(parents=True, exist_ok=True)
    key.parent.chmod(0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"pulsarlab lab {folder}", "-f", str(key)],
                   check=True, capture_output=True, timeout=30)


def _run_host(docker: DockerClient, lab: Lab, node: str, image: str) -> None:
    info = lab.hosts[node]
    if docker.container.exists(info["container"]):
        docker.container.remove(info["container"], force=True)
    if lab.known_hosts.is_file():  # a new machine: its host key is not the one remembered for the address
        subprocess.run(["ssh-keygen", "-R", info["address"], "-f", str(lab.known_hosts)], capture_output=True, timeout=30)
    extra: dict = dict(SYSTEMD_RUN) if info["kind"] == "systemd" else {"init": True}
    resolv = Path(lab.folder) / "resolv.conf"
    resolv.write_text(RESOLV_CONF)
    volumes = [(str(lab.key) + ".pub", "/root/.ssh/authorized_keys", "ro"), (str(resolv), "/etc/resolv.conf", "ro"),
               *extra.pop("volumes", [])]
    docker.run(image, detach=True, name=info["container"], hostname=node, networks=[lab.network], ip=info["address"],
               cap_add=["NET_ADMIN"], volumes=volumes, labels={LABEL: Path(lab.folder).name, f"{LABEL}.node": node,
                                                               f"{LABEL}.folder": lab.folder}, **extra)


def mirror_address(subnet: IPv4Network) -> str:
    return str(list(subnet.hosts())[MIRROR_HOST - 1])


def _run_mirror(docker: DockerClient, lab: Lab, image: str) -> bool:
    """The mirror's container (once per lab): Python's HTTP server over the distributions' folder,
    mounted read-only where Maven's layout puts it, so the URL paths are Maven Central's."""
    name = lab.mirror_container
    if docker.container.exists(name):
        if docker.container.inspect(name).state.running:
            return False
        docker.container.remove(name, force=True)
    folder = distribution.maven_artifact_dir()
    inside = f"{MIRROR_ROOT}/{folder.relative_to(distribution.maven_repo())}"
    address = mirror_address(IPv4Network(lab.subnet))
    docker.run(image, ["python3", "-m", "http.server", str(MIRROR_PORT), "--bind", address, "--directory", MIRROR_ROOT],
               detach=True, name=name, networks=[lab.network], ip=address, init=True, volumes=[(str(folder), inside, "ro")],
               labels={LABEL: Path(lab.folder).name, f"{LABEL}.node": "mirror", f"{LABEL}.folder": lab.folder})
    return True


def _wait_mirror(docker: DockerClient, lab: Lab, version: str, progress: Reporter) -> None:
    """The mirror answers with the SHA-1 of ``version``'s distribution (bounded; its log on failure)."""
    url = f"{lab.mirror}/{distribution.maven_tarball(version).relative_to(distribution.maven_repo())}.sha1"
    deadline = time.monotonic() + MIRROR_WAIT_S
    with progress.step("mirror", f"Maven mirror at {lab.mirror}", "waiting for it", "serving"):
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    answer.read()
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise StateError(f"the lab's Maven mirror did not serve {url} within {MIRROR_WAIT_S:.0f}s ({exc}); "
                                     f"its log:\n{docker.container.logs(lab.mirror_container, tail=15)}") from None
                time.sleep(0.3)


def ssh_command(lab: Lab, node: str, command: str) -> list[str]:
    return ["ssh", "-i", str(lab.key), *ssh_options(lab), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
            f"root@{lab.hosts[node]['address']}", command]


def _wait_ssh(docker: DockerClient, lab: Lab, nodes: list[str], progress: Reporter) -> None:
    """Every named host answers ``ssh true`` with the lab's key (bounded; the host's log on failure)."""
    pending, deadline = list(nodes), time.monotonic() + SSH_WAIT_S
    with progress.step("ssh", f"SSH on {len(nodes)} host(s)", "waiting for sshd", "answering"):
        while pending:
            pending = [n for n in pending
                       if subprocess.run(ssh_command(lab, n, "true"), capture_output=True, timeout=30).returncode != 0]
            if pending and time.monotonic() > deadline:
                n = pending[0]
                tail = docker.container.logs(lab.hosts[n]["container"], tail=15)
                raise StateError(f"host {n} ({lab.hosts[n]['address']}) did not answer SSH within {SSH_WAIT_S:.0f}s; "
                                 f"its container's log:\n{tail}")
            if pending:
                time.sleep(0.3)


def up(topology: str, folder: Path, systemd: list[str], bare: list[str], docker_host: str | None = None,
       progress: Reporter = NO_PROGRESS, sent: list[str] | None = None) -> Lab:
    """Make (or complete) the lab in ``folder``: hosts running, the Maven mirror serving, SSH
    answering, files written. The hosts of ``sent`` get the distribution from the controller over
    SSH (the role's default); the others download it from the mirror."""
    topo = load(topology, loopback=False)
    kinds = kinds_of(topo, systemd, bare, sent)
    folder = folder.resolve()
    old = Lab.read(folder)
    if old is not None and (problem := reuse_problem(old, kinds)):
        raise UsageError(f"{folder} holds a lab of {problem}: 'pulsarlab hosts down' it first, or name another --out")
    docker = engine.client(docker_host)
    dist = distribution.resolve(None, version=topo.pulsar_version or distribution.DEFAULT_VERSION)
    folder.mkdir(parents=True, exist_ok=True)
    images = ensure_images(docker, {*kinds.values(), "plain"}, progress)  # plain: the mirror's too
    _keypair(folder)
    digest = state_digest(folder)
    network = f"pulsarlab-lab-{digest}"
    made_network = False
    if old is not None and docker.network.exists(network):
        subnet = IPv4Network(old.subnet)
    else:
        subnet = free_subnet(_taken(docker))
        docker.network.create(network, subnet=str(subnet), labels={LABEL: folder.name, f"{LABEL}.folder": str(folder)})
        made_network = True
    where = addresses(topo, subnet)
    lab = Lab(str(folder), docker.client_config.host or engine.default_host(), network, str(subnet),
              {n: {"address": where[n], "kind": kinds[n], "container": f"pulsarlab-lab-{digest}-{n}"} for n in kinds},
              f"http://{mirror_address(subnet)}:{MIRROR_PORT}", sorted(sent or []))
    started: list[str] = []
    mirror_started = False
    try:
        with progress.step("hosts", f"{len(kinds)} host container(s) on {network} ({subnet})", "starting", "running"):
            for node, info in lab.hosts.items():
                c = info["container"]
                if docker.container.exists(c) and docker.container.inspect(c).state.running:
                    continue
                _run_host(docker, lab, node, images[info["kind"]])
                started.append(node)
            mirror_started = _run_mirror(docker, lab, images["plain"])
        _wait_mirror(docker, lab, dist.version, progress)
        _wait_ssh(docker, lab, list(lab.hosts), progress)
    except (DockerException, StateError) as exc:
        for name in [lab.hosts[n]["container"] for n in started] + ([lab.mirror_container] if mirror_started else []):
            if docker.container.exists(name):
                docker.container.remove(name, force=True)
        if made_network:
            docker.network.remove(network)
        if isinstance(exc, DockerException):
            raise StateError(f"the lab's hosts could not be started: {str(exc).strip().splitlines()[-1]}") from None
        raise
    write_files(lab, at_addresses(topo, where), dist)
    lab.save()
    return lab


def write_files(lab: Lab, topo: Topology, dist: distribution.Distribution) -> None:
    """The inventory rendered for the hosts, and each host's SSH connection beside it."""
    folder = Path(lab.folder)
    render_ansible(topo, folder, dist.version, dist.conf)
    for node in lab.hosts:
        path = folder / "host_vars" / f"{node}.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        mirror = {} if node in lab.sent else {"pulsar_node_maven_mirror": lab.mirror}
        path.write_text(yaml.safe_dump({**connection(lab), **mirror}, sort_keys=False))


def down(folder: Path, docker_host: str | None = None) -> list[str]:
    """Remove the lab's containers and network (found by their label too, should the record be
    gone); its folder keeps the files. Returns the containers removed."""
    folder = folder.resolve()
    lab = Lab.read(folder)
    docker = engine.client(docker_host or (lab.docker_host if lab else None))
    found = docker.container.list(all=True, filters={"label": f"{LABEL}.folder={folder}"})
    names = sorted({c.name for c in found} | {h["container"] for h in (lab.hosts.values() if lab else [])
                                              if docker.container.exists(h["container"])})
    if names:
        docker.container.remove(names, force=True, volumes=True)
    for net in docker.network.list(filters={"label": f"{LABEL}.folder={folder}"}):
        docker.network.remove(net)
    (folder / LAB_FILE).unlink(missing_ok=True)
    return names


def replace(folder: Path, node: str) -> Lab:
    """The machine of ``node`` lost with everything on it, and a new one of the same kind in its
    place (same name, address and SSH key): what ``replace-bookie.yml`` is rehearsed on."""
    lab = Lab.read(folder.resolve())
    if lab is None:
        raise UsageError(f"{folder}: no lab here ('pulsarlab hosts up TOPOLOGY --out {folder}' makes one)")
    if node not in lab.hosts:
        raise UsageError(f"no host {node!r} in the lab (hosts: {', '.join(lab.hosts)})")
    docker = engine.client(lab.docker_host)
    _run_host(docker, lab, node, ensure_images(docker, {lab.hosts[node]["kind"]}, NO_PROGRESS)[lab.hosts[node]["kind"]])
    _wait_ssh(docker, lab, [node], NO_PROGRESS)
    return lab
