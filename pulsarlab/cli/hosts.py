"""``pulsarlab hosts up|down|replace``: rehearsal hosts to deploy onto before production."""

import json
from pathlib import Path
from typing import Annotated

import typer

from pulsarlab.cli.options import JsonOpt, TopologyOpt, err, out
from pulsarlab.cli.progress import reporter

hosts_app = typer.Typer(no_args_is_help=True, help=(
    "Rehearsal hosts: one container per node, each with its own network namespace and address, "
    "reached over SSH, to rehearse deploy.yml, the runbooks and the scenarios on."))

FolderArg = Annotated[Path, typer.Argument(help="the lab's folder (what 'hosts up --out' wrote)")]
HostOpt = Annotated[str | None, typer.Option(help="Docker engine (default: $DOCKER_HOST or scripts/docker-engine's)")]


def _names(value: str) -> list[str]:
    return [n for n in (v.strip() for v in value.split(",")) if n]


@hosts_app.command("up")
def hosts_up(
    topology: TopologyOpt,
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="the lab's folder: inventory, SSH key, topology")],
    systemd: Annotated[str, typer.Option(help="hosts run by systemd: all, none or NODE,NODE (others: sshd alone)")] = "all",
    bare: Annotated[str, typer.Option(help="hosts without Java (deploy.yml installs it from their mirror): NODE,NODE")] = "",
    sent: Annotated[str, typer.Option(help=(
        "hosts that get the Pulsar distribution from the controller over SSH (the playbooks' default), "
        "NODE,NODE; the others download it from the lab's Maven mirror"))] = "",
    host: HostOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Make one host per node of TOPOLOGY (or complete a lab already in --out) and write the
    inventory for them. Then: ansible-playbook -i DIR/inventory.yml playbooks/deploy.yml, and
    configure.yml -e pulsarlab_state_dir=STATE. A second run changes nothing."""
    from pulsarlab.lab import hosts as lab_hosts

    with reporter(err, quiet=as_json) as progress:
        lab = lab_hosts.up(topology, out_dir, [] if systemd == "none" else _names(systemd), _names(bare), host, progress,
                           sent=_names(sent))
    if as_json:
        print(json.dumps({"folder": lab.folder, "network": lab.network, "subnet": lab.subnet, "controller": lab.gateway,
                          "mirror": lab.mirror, "sent": lab.sent,
                          "inventory": str(Path(lab.folder) / "inventory.yml"), "hosts": lab.hosts}))
        return
    for node, info in lab.hosts.items():
        out.print(f"{node:<14} {info['address']:<15} {info['kind']:<8} {info['container']}", markup=False, highlight=False)
    out.print(f"inventory: {Path(lab.folder) / 'inventory.yml'} (SSH as root with {lab.key}); this machine is "
              f"{lab.gateway} on {lab.network}; Maven mirror (pulsar_node_maven_mirror): {lab.mirror}",
              markup=False, highlight=False)


@hosts_app.command("down")
def hosts_down(folder: FolderArg, host: HostOpt = None) -> None:
    """Remove the lab's hosts and network (the folder's files stay). Safe to run again."""
    from pulsarlab.lab import hosts as lab_hosts

    gone = lab_hosts.down(folder, host)
    out.print(f"removed {len(gone)} host container(s) of {folder}" if gone else f"no host of {folder} was running",
              markup=False, highlight=False)


@hosts_app.command("replace")
def hosts_replace(folder: FolderArg, node: Annotated[str, typer.Argument(help="the host whose machine is lost")]) -> None:
    """The host's machine lost with its disk, and a new, empty one in its place (same name, address
    and key): what replace-bookie.yml is rehearsed on."""
    from pulsarlab.lab import hosts as lab_hosts

    lab = lab_hosts.replace(folder, node)
    out.print(f"{node}: a new {lab.hosts[node]['kind']} host at {lab.hosts[node]['address']}, nothing of the old one on it",
              markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(hosts_app, name="hosts")
