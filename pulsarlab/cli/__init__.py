"""The ``pulsarlab`` command line: a thin Typer layer, one module per command group."""

from pulsarlab.cli.root import app, main

__all__ = ["app", "main"]
