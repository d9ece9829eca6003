"""`pip install .` into a fresh venv outside the repository installs a working tool.

The wheel must carry the playbook skeletons and the project's own Ansible collection
(nodemanager.core, for `purge`); a tool that only works from a checkout failed with "playbook
skeletons missing". This is what pipx does too.

The wheel is built from the repository and installed, without its dependencies, into a new
venv; the dependencies are borrowed from the project's venv through a .pth file (a plain path
line: the project's editable nodemanager is not activated by it, so the installed copy is the
one that runs). A full dependency install would add minutes of pip work and test pip, not us.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from nodemanager import __version__

pytestmark = pytest.mark.ansible
ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NODEMANAGER_")}
    env.pop("PYTHONPATH", None)
    # ansible-playbook is a dependency's script: the project venv's.
    env["NODEMANAGER_ANSIBLE_BIN"] = str(Path(sys.executable).parent)
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `nodemanager` script of a fresh venv with the repository pip-installed (not editable)."""
    base = tmp_path_factory.mktemp("pipinstall")
    made = run(sys.executable, "-m", "venv", base / "venv", cwd=base)
    assert made.returncode == 0, made.stderr
    python = base / "venv" / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=base)
    borrowed = sysconfig.get_path("purelib")  # this interpreter's: the project venv
    Path(site.stdout.strip(), "project-deps.pth").write_text(borrowed + "\n")
    pip = run(
        python, "-m", "pip", "install", "--quiet", "--no-deps", str(ROOT), cwd=base,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-3000:]
    where = run(python, "-c", "import nodemanager; print(nodemanager.__file__)", cwd=base)
    assert where.stdout.startswith(str(base)), where.stdout  # the copy, not the checkout
    return base / "venv" / "bin" / "nodemanager"


def test_installed_tool_renders_and_applies_outside_the_repository(installed, tmp_path):
    target = tmp_path / "managed"
    target.mkdir()
    (target / "stale").write_text("not declared\n")
    configset = {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "pkg"},
        "spec": {
            "selector": {},  # every node: the labels carry the os-release ID
            "files": [
                {"path": str(target), "ensure": "directory", "purge": True},
                {"path": str(target / "motd"), "content": "installed\n"},
            ],
        },
    }
    (tmp_path / "cs.yaml").write_text(yaml.safe_dump(configset))

    version = run(installed, "--version", cwd=tmp_path)
    assert version.returncode == 0 and __version__ in version.stdout, version.stderr
    rendered = run(installed, "render", "-f", "cs.yaml", cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    assert "nodemanager.core.purge" in rendered.stdout
    # --no-fast-path: every task, purge included, goes through the packaged collection.
    applied = run(installed, "apply", "-f", "cs.yaml", "--no-fast-path", cwd=tmp_path)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (target / "motd").read_text() == "installed\n"
    assert not (target / "stale").exists()
