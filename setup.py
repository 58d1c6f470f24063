"""The one thing pyproject.toml cannot say: the top-level templates/ folder is the package
``pulsarlab.templates`` in the wheel, and the node role's helper files (the upgrade's order and
gates, shared with the playbooks) ``pulsarlab.node_files`` (their ``package-dir`` mappings and data
are in pyproject.toml)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["pulsarlab*"]), "pulsarlab.templates", "pulsarlab.node_files"])
