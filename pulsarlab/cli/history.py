"""``pulsarlab history push DIR URI``: a finished run's history copied to where a Spark cluster reads it."""

from pathlib import Path
from typing import Annotated

import typer

history_app = typer.Typer(no_args_is_help=True, help="Move recorded histories where a Spark cluster can read them.")


@history_app.command("push")
def push_cmd(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="a finished run's history folder ('workload run --out')")],
    destination: Annotated[str, typer.Argument(
        metavar="URI", help="a new or empty folder: s3://bucket/prefix, hdfs://namenode/dir, gs://..., file:///abs or a path")],
) -> None:
    """Copy a run's history (its parts, _run.json, faults) to URI with Arrow's file systems; print the URI.

    Credentials are each store's usual ones (S3: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_REGION; a MinIO-style store: AWS_ENDPOINT_URL_S3 or ?endpoint_override=HOST:PORT in the URI).
    Exit code: 0 copied, 2 usage error (no such folder, a scheme Arrow cannot open, no credentials,
    a destination that is not empty).
    """
    from pulsarlab.history import not_a_history
    from pulsarlab.history.location import LocationError, push

    if (problem := not_a_history(directory)) is not None:
        raise LocationError(problem)
    uri, files, size = push(directory, destination)
    print(uri)
    typer.echo(f"{files} file(s), {size} bytes copied", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(history_app, name="history")
