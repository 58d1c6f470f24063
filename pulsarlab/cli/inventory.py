"""``pulsarlab inventory validate FILE``: a hosts file checked before Ansible gets it."""

import json
from pathlib import Path
from typing import Annotated

import typer

from pulsarlab.cli.options import JsonOpt, out
from pulsarlab.errors import CheckFailed

inventory_app = typer.Typer(no_args_is_help=True, help="Hosts for Ansible: a topology whose nodes name their addresses.")


@inventory_app.command("validate")
def inventory_validate(
    file: Annotated[Path, typer.Argument(help="a topology YAML whose nodes each have an address")],
    as_json: JsonOpt = False,
) -> None:
    """Check a hosts file with the topology model and what real hosts need (an address each, not
    loopback, no two nodes on one address and port). Exit code: 0 valid, 1 not (each problem on a line)."""
    from pulsarlab.ansible.inventory import validate_hosts

    result = validate_hosts(file)
    if as_json:
        print(json.dumps({"valid": result.ok, "problems": result.problems,
                          "summary": result.summary() if result.ok else None}))
    elif result.ok:
        out.print(f"{file}: valid: {result.summary()}")
    if not result.ok:
        raise CheckFailed("\n".join(f"{file}: {problem}" for problem in result.problems), result_shown=True)


def register(app: typer.Typer) -> None:
    app.add_typer(inventory_app, name="inventory")
