"""Where a history lives: a folder on this machine or a URI that Arrow's file systems open.

A location given as a path (``runs/a``, ``~/runs/a``) is made absolute here, on the machine that
was given it, and written as a ``file://`` URI: a Spark executor started in another working
directory (or on another host sharing the folder) opens the same files. A URI (``file:///abs``,
``s3://bucket/prefix``, ``hdfs://namenode/dir``, ``gs://``, ``abfs://``) is kept as it is and
opened through :func:`pyarrow.fs.FileSystem.from_uri`, with that file system's usual credentials
(for S3 the standard AWS variables; ``AWS_ENDPOINT_URL_S3`` for a MinIO-style store).

Nothing here reads a row: it names places and says in one line why one cannot be opened.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pulsarlab.errors import UsageError

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")


class LocationError(UsageError, ValueError):
    """A history location that cannot be opened: a scheme Arrow has no file system for, no
    credentials, an unreachable store. Its text is one line naming the location (exit code 2)."""


def scheme_of(location: str | os.PathLike[str]) -> str | None:
    """``s3`` of ``s3://bucket/x``; None for a path (``runs/a``, ``/abs``, ``C:\\x``)."""
    found = _SCHEME.match(os.fspath(location))
    return found["scheme"].lower() if found else None


def is_local(location: str | os.PathLike[str]) -> bool:
    """A path, or a ``file://`` URI: a folder of this machine's own file system."""
    return scheme_of(location) in (None, "file")


def as_uri(location: str | os.PathLike[str]) -> str:
    """The URI of a history location: a path made absolute (from this process's working
    directory, ``~`` expanded) as ``file:///...``; a URI as given, without a trailing slash."""
    text = os.fspath(location)
    if scheme_of(text) is None:
        return Path(text).expanduser().resolve().as_uri()
    return text.rstrip("/") if not text.endswith("://") else text


def local_path(location: str | os.PathLike[str]) -> Path:
    """The absolute path on this machine of a path or ``file://`` URI (a ``LocationError`` for
    another scheme: it is not a folder here)."""
    text = os.fspath(location)
    scheme = scheme_of(text)
    if scheme is None:
        return Path(text).expanduser().resolve()
    if scheme != "file":
        raise LocationError(f"{text} is not on this machine's file system (a {scheme}:// URI)")
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise LocationError(f"{text}: a file:// URI names no host but localhost (file:///abs/path)")
    return Path(unquote(parts.path))


def shown(location: str | os.PathLike[str]) -> str:
    """How a location is named in messages: a local one as its absolute path, another as its URI."""
    return str(local_path(location)) if is_local(location) else as_uri(location)


def open_location(location: str | os.PathLike[str]):  # type: ignore[no-untyped-def]
    """``(file system, path inside it)`` of a location, through ``pyarrow.fs``; a
    :class:`LocationError` naming the location and why in one line when it cannot be opened.
    (Untyped: pyarrow has no type hints; the pair is ``(pyarrow.fs.FileSystem, str)``.)"""
    from pyarrow import fs

    uri = as_uri(location)
    try:
        return fs.FileSystem.from_uri(uri)
    except (OSError, ValueError) as exc:  # ArrowInvalid (an unknown scheme) is a ValueError
        raise LocationError(_opening_failed(uri, exc)) from None


def _opening_failed(uri: str, exc: BaseException) -> str:
    text = str(exc).strip()
    why = text.splitlines()[0] if text else type(exc).__name__
    scheme = scheme_of(uri) or "file"
    if why.startswith("Unrecognized filesystem type"):
        return (f"cannot open history location {uri}: Arrow has no file system for {scheme}:// "
                "(paths, file://, s3://, gs://, abfs:// and hdfs:// are known)")
    if scheme == "hdfs" and "libjvm" in why:
        why = "Arrow's HDFS client needs a JVM (JAVA_HOME) and Hadoop's libhdfs (HADOOP_HOME, CLASSPATH)"
    return f"cannot open history location {uri}: {why}"


def check_folder(location: str | os.PathLike[str]) -> str | None:
    """Why ``location`` is no folder Arrow can list, in one line (no credentials, no such
    bucket or prefix, a file); None when it is one. Opens the file system and lists nothing."""
    from pyarrow import fs

    uri = as_uri(location)
    try:
        filesystem, path = open_location(uri)
        info = filesystem.get_file_info(path)
    except LocationError as exc:
        return str(exc)
    except (OSError, ValueError) as exc:
        return _opening_failed(uri, exc)
    if info.type == fs.FileType.Directory:
        return None
    what = "a file" if info.type == fs.FileType.File else "nothing"
    return f"no history folder {uri}: {what} there, expected a run's history folder"


def push(folder: str | os.PathLike[str], destination: str) -> tuple[str, int, int]:
    """Copy a finished run's history folder to ``destination`` (a URI or a path) with
    :func:`pyarrow.fs.copy_files`; ``(its URI, files, bytes)``. The destination must be new or
    empty: parts of two runs in one folder would be judged as one history."""
    from pyarrow import fs

    source = local_path(folder)
    if not source.is_dir():
        raise LocationError(f"no history folder {source} to push")
    files = sorted(p for p in source.rglob("*") if p.is_file())
    target = as_uri(destination)
    filesystem, path = open_location(target)
    try:
        there = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True, recursive=False))
        if there:
            raise LocationError(f"{target} is not empty ({len(there)} entries, e.g. {there[0].base_name}): "
                                "push each run to a folder of its own")
        filesystem.create_dir(path, recursive=True)
        fs.copy_files(str(source), path, source_filesystem=fs.LocalFileSystem(), destination_filesystem=filesystem)
    except (OSError, ValueError) as exc:
        if isinstance(exc, LocationError):
            raise
        raise LocationError(_opening_failed(target, exc)) from None
    return target, len(files), sum(p.stat().st_size for p in files)
