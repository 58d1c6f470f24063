"""The Python daemon of a local Spark's executors (``spark.python.daemon.module``): PySpark's own,
importing PySpark from this interpreter's installed package rather than from the zip of it that
Spark puts first on the workers' ``PYTHONPATH``.

Python compiles what it imports from a zip every time (it keeps no bytecode for it): the daemon
spent about a second compiling ``pyspark`` before it forked its first worker, and each worker
compiled ``pyspark.worker`` and what it imports again. The installed package is the same code,
compiled once into its ``__pycache__``. A zip is dropped from the path only when it is that very
install's (``pyspark.zip`` inside the installed ``pyspark`` folder, ``py4j`` of the version
installed beside it); otherwise the path stays as Spark made it.

Nothing here may import pyarrow or pandas: the daemon forks its workers, and both start threads
when imported (PySpark's daemon imports the worker module only after the fork for that reason).
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path


def installed_zips(path: list[str]) -> set[str]:
    """The entries of ``path`` that are zips of a PySpark (and its py4j) that ``path`` also holds
    installed: ``pyspark.zip`` in the ``python/lib`` folder of an installed ``pyspark`` package whose
    folder is on ``path``, and beside it the zip of the py4j release installed there."""
    dirs = {Path(e).resolve() for e in path if e and not e.endswith(".zip")}
    out = set()
    for entry in path:
        zip_file = Path(entry)
        if zip_file.name != "pyspark.zip":
            continue
        package = zip_file.resolve().parent.parent.parent  # <site>/pyspark/python/lib/pyspark.zip
        if package.name != "pyspark" or not (package / "__init__.py").is_file() or package.parent not in dirs:
            continue
        out.add(entry)
        try:
            py4j = metadata.version("py4j")
        except metadata.PackageNotFoundError:
            continue
        beside = zip_file.resolve().parent / f"py4j-{py4j}-src.zip"
        if any((d / "py4j" / "__init__.py").is_file() for d in dirs):
            out.update(e for e in path if e.endswith(".zip") and Path(e).resolve() == beside)
    return out


def main() -> None:
    dropped = installed_zips(sys.path)
    sys.path[:] = [e for e in sys.path if e not in dropped]
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
