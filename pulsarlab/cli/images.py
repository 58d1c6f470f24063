"""``pulsarlab image build``: Pulsar (or Prometheus) images made without any registry."""

from typing import Annotated

import typer

from pulsarlab.cli.options import err, out
from pulsarlab.cli.progress import reporter

image_app = typer.Typer(no_args_is_help=True, help="Pulsar container images, built without any registry.")


@image_app.command("build")
def image_build(
    pulsar_version: Annotated[str | None, typer.Option(help="Pulsar version (default: the local runtime's)")] = None,
    distribution: Annotated[str | None, typer.Option(help="a pulsar-server-distribution tarball or folder")] = None,
    tag: Annotated[str | None, typer.Option(help="image tag (default: pulsarlab/pulsar:<version>)")] = None,
    host: Annotated[str | None, typer.Option(help="Docker engine (default: $DOCKER_HOST or scripts/docker-engine's)")] = None,
    prometheus: Annotated[bool, typer.Option("--prometheus", help="instead: Prometheus from Debian's package")] = False,
) -> None:
    """Build a Pulsar image from Debian, its Java 17 and the local runtime's distribution; cached by inputs."""
    from pulsarlab.distribution import DEFAULT_VERSION
    from pulsarlab.runtime.docker.image import ensure_image
    from pulsarlab.runtime.docker.prometheus_image import ensure_prometheus_image

    with reporter(err) as progress:
        result = (ensure_prometheus_image(tag or "pulsarlab/prometheus:debian", host, say=progress) if prometheus
                  else ensure_image(pulsar_version or DEFAULT_VERSION, distribution, tag, host, say=progress))
    if result.built:
        out.print(f"built {result.tag} ({result.image_id[:19]}) in {result.seconds:.1f}s")
    else:
        out.print(f"{result.tag} is up to date ({result.image_id[:19]}): same inputs, nothing built ({result.seconds:.1f}s)")


def register(app: typer.Typer) -> None:
    app.add_typer(image_app, name="image")
