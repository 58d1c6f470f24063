"""The playbooks pass ansible-lint (its production profile) and Ansible's own syntax check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def test_playbooks_pass_ansible_lint() -> None:
    books = sorted(p.name for p in PLAYBOOKS.glob("*.yml"))
    assert {"deploy.yml", "configure.yml"} <= set(books)
    proc = subprocess.run([sys.executable, "-m", "ansiblelint", "--nocolor", "--format=pep8", "--profile=production",
                           *books], cwd=PLAYBOOKS, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
