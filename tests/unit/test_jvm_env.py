"""A node's JVM options against the distribution's own scripts. pulsarlab sets PULSAR_EXTRA_OPTS and
BOOKIE_EXTRA_OPTS, and setting them replaces the defaults that ``conf/pulsar_env.sh`` and
``conf/bkenv.sh`` give: every option of those defaults must therefore be among pulsarlab's, so a
node runs as the distribution starts it (plus pulsarlab's own options)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from pulsarlab import distribution
from pulsarlab.render import node_dirs
from pulsarlab.runtime.jvm import pulsar_env
from pulsarlab.topology import Role, load


def script_default(home: Path, role: Role) -> tuple[str, list[str]]:
    """The variable ``bin/pulsar`` hands the role's JVM and the options the scripts default it to
    (sourced as ``bin/pulsar`` sources them: a bookie reads bkenv.sh only)."""
    scripts = ["conf/bkenv.sh"] if role == Role.BOOKIE else ["conf/bkenv.sh", "conf/pulsar_env.sh"]
    var = "BOOKIE_EXTRA_OPTS" if role == Role.BOOKIE else "PULSAR_EXTRA_OPTS"
    sourced = "; ".join(f". {s} >/dev/null 2>&1" for s in scripts)
    out = subprocess.run(["bash", "-c", f'{sourced}; printf %s "${var}"'], cwd=home, env={"PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout
    return var, shlex.split(out)


@pytest.mark.parametrize("role", list(Role), ids=lambda r: r.value)
def test_every_default_option_of_the_distributions_scripts_reaches_the_node(role: Role, tmp_path: Path) -> None:
    home = distribution.resolve().home  # the cached release (.ci/run fetches it ahead)
    topo = load("smoke")
    node = topo.nodes_of(role)[0]
    var, defaults = script_default(home, role)
    assert defaults, f"{var}: the scripts give no default (read wrongly?)"
    ours = shlex.split(pulsar_env(topo, node, node_dirs(tmp_path, node))[var])
    assert [o for o in defaults if o not in ours] == [], ours
