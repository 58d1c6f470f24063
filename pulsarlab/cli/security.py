"""``pulsarlab token create`` and ``pulsarlab grant``: a thin layer over :mod:`pulsarlab.admin.credentials`."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pulsarlab.cli import lazy
from pulsarlab.cli.options import StateDirOpt, out

if TYPE_CHECKING:
    from pulsarlab import ops
    from pulsarlab.admin import credentials
else:  # loaded on first use: a command pays only for what it runs
    ops = lazy.module("pulsarlab.ops")
    credentials = lazy.module("pulsarlab.admin.credentials")

token_app = typer.Typer(help="JWT tokens of a secure cluster", no_args_is_help=True)


@token_app.command("create")
def token_create(
    role: Annotated[str, typer.Argument(help="the role the token authenticates as (its 'sub')")],
    ttl: Annotated[str | None, typer.Option(help="expiry: 30m, 12h, 7d... (default: none)")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="write the token to this file (mode 0600)")] = None,
    state_dir: StateDirOpt = None,
) -> None:
    """Mint a token for ROLE, signed with the cluster's key: printed on stdout only, or written to --out."""
    token = credentials.create_token(ops.open_cluster(state_dir), role, ttl, out_file)
    if out_file is None:
        print(token)
    else:
        out.print(f"token for role {role} written to {out_file} (mode 0600)", highlight=False)


def grant_cmd(
    role: Annotated[str, typer.Argument(help="the role to grant")],
    namespace: Annotated[str, typer.Argument(help="tenant/namespace")],
    actions: Annotated[str, typer.Option(help=f"comma-separated: {', '.join(credentials.ACTIONS)}")] = "produce,consume",
    state_dir: StateDirOpt = None,
) -> None:
    """Grant ROLE the --actions on NAMESPACE of a secure cluster (admin REST permissions)."""
    granted = credentials.grant(ops.open_cluster(state_dir), role, namespace, actions)
    out.print(f"{role} may now {', '.join(granted)} on {namespace}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(token_app, name="token")
    app.command("grant")(grant_cmd)
