"""``python -m pulsarlab.cli``: the same command as the ``pulsarlab`` console script."""

from pulsarlab.cli.root import main

main()
