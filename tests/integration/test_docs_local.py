"""The local-mode commands of the docs run as written, on this host (real Ansible).

Getting started's first block runs in the checkout, as a reader would type it; the Local mode
guide's block runs in a directory of its own (it writes site.yml and reads the reader's own
my-configsets.yaml, here a copy of the demo), with examples/ beside it. Both change only
/tmp/nodemanager-demo, as `make demo` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import ROOT, run_block

pytestmark = pytest.mark.ansible


def run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_getting_started_local_block_runs_and_converges():
    block = run_block("local")
    proc = run(block.text, ROOT)
    assert proc.returncode == 0, f"{block.where()}:\n{proc.stdout}\n{proc.stderr}"
    summaries = [line for line in proc.stdout.splitlines() if line.startswith("demo: ")]
    # --check, the first apply, the second apply: the page promises the last says 0 changed
    assert len(summaries) == 3, proc.stdout
    assert summaries[-1].endswith(" 0 changed, 0 failed"), summaries
    assert "hosts:" in proc.stdout  # render printed the playbook
    assert Path("/tmp/nodemanager-demo/motd").read_text().startswith("Managed by nodemanager.")


def test_local_mode_guide_block_runs(tmp_path):
    block = run_block("local-mode")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    shutil.copy(ROOT / "examples" / "demo.yaml", tmp_path / "my-configsets.yaml")
    proc = run(block.text, tmp_path)
    assert proc.returncode == 0, f"{block.where()}:\n{proc.stdout}\n{proc.stderr}"
    site = (tmp_path / "site.yml").read_text()
    assert "hosts:" in site, site[:500]
    assert "community.general.pacman" in proc.stdout  # the Arch render printed its package task
    assert proc.stdout.count("demo: ") >= 3, proc.stdout
