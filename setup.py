"""The one thing pyproject.toml cannot say: the top-level templates/ folder is the package
``pulsarlab.templates`` in the wheel (its ``package-dir`` mapping and data are in pyproject.toml)."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["pulsarlab*"]), "pulsarlab.templates"])
