"""The CLI's own start: parsing a command loads none of the heavy libraries (pyarrow, pandas,
PySpark, python-on-whales, the token and certificate code); a command loads what it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("pyarrow", "pandas", "pyspark", "numpy", "plotly", "python_on_whales", "jwt", "cryptography", "kazoo",
         "pydantic", "requests")  # the last two: the topology model and the admin client, loaded by commands that use them


def loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_nothing_heavy() -> None:
    assert loaded_after("import pulsarlab.cli") == []


def test_help_loads_nothing_heavy() -> None:
    code = ("from typer.testing import CliRunner\nfrom pulsarlab.cli import app\n"
            "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0 and 'workload' in r.output, r.output")
    assert loaded_after(code) == []


def test_a_command_loads_what_it_runs(tmp_path: Path) -> None:
    """verify looks into the folder's Parquet files (Arrow) before any Spark is loaded."""
    code = ("from typer.testing import CliRunner\nfrom pulsarlab.cli import app\n"
            f"r = CliRunner().invoke(app, ['verify', {str(tmp_path)!r}])\nassert r.exit_code == 2, r.output")
    loaded = loaded_after(code)
    assert "pyarrow" in loaded and "pyspark" not in loaded, loaded


def test_the_cluster_commands_load_no_arrow_and_no_cryptography() -> None:
    """What ``up``, ``down``, ``status``, ``node`` and the rest import (pulsarlab.ops, the runtimes,
    the scenarios' list) leaves out Arrow and numpy (a history's libraries) and the token and
    certificate code (a secure topology's): a sixth of a second of every such command's start."""
    code = ("from typer.testing import CliRunner\nfrom pulsarlab.cli import app\nimport pulsarlab.ops\n"
            "import pulsarlab.runtime.local, pulsarlab.runtime.docker.cluster, pulsarlab.runtime.hosts\n"
            "for argv in (['status', '--state-dir', '/nonexistent'], ['scenario', 'list', '--json']):\n"
            "    r = CliRunner().invoke(app, argv)\n    assert r.exit_code in (0, 1), r.output")
    history_or_secrets = {"pyarrow", "numpy", "pandas", "pyspark", "plotly", "jwt", "cryptography"}
    assert history_or_secrets & set(loaded_after(code)) == set()


def test_help_and_a_usage_error_load_no_rich() -> None:
    """rich (a third of the CLI's start) is loaded by the commands that draw with it: the root help
    and a usage error are plain text (``pulsarlab --help``: 0.25 s of CPU instead of 0.34 s)."""
    for argv in (["--help"], ["up", "--no-such-option"]):
        code = ("import contextlib, io\nfrom pulsarlab.cli.root import app\n"
                f"with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
                f"    try:\n        app({argv!r})\n    except SystemExit:\n        pass\n"
                "print(json.dumps(sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))))")
        proc = subprocess.run([sys.executable, "-c", f"import json, sys\n{code}"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == [], argv


def test_every_name_the_history_package_offers_is_its_modules_own() -> None:
    """``pulsarlab.history`` loads each name's module on first use: every name it lists resolves,
    to the very object of the module that defines it."""
    import importlib

    import pulsarlab.history as history

    assert sorted(history.__all__) == sorted(history._WHERE)
    for name in history.__all__:
        home = importlib.import_module(f"pulsarlab.history.{history._WHERE[name]}")
        assert getattr(history, name) is getattr(home, name), name
