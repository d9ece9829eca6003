"""`make build`: bin/nodemanager is one file that runs on a Python with nothing installed, on
every CPython minor the platforms ship (3.11, 3.12, 3.13; pyenv's interpreters here)."""

import fcntl
import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import artifacts
from tests.integration.helpers import write_configsets

pytestmark = pytest.mark.ansible
ROOT = Path(__file__).resolve().parents[2]


def interpreter(minor: str) -> str:
    """This machine's CPython 3.<minor>: pyenv's, or the build interpreter itself."""
    if sys.version_info[:2] == (3, int(minor)):
        return sys.executable
    found = sorted(
        glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"))
    )
    if not found:
        pytest.skip(f"no CPython 3.{minor} on this machine")
    return found[-1]


@pytest.fixture(scope="module")
def single_file() -> Path:
    """The file `make build` writes (deploy/build.py), from the release the tests share (built
    once per source hash, tests/artifacts.py)."""
    return artifacts.agent_file()


def run(
    binary: Path, tmp: Path, *args: str, python: str = sys.executable
) -> subprocess.CompletedProcess:
    # `python -I -S`: no site-packages and no user paths, so nothing of the venv can help it.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "NODEMANAGER_UNPACK_DIR": str(tmp / "unpacked"),
    }
    return subprocess.run(
        [python, "-I", "-S", str(binary), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=300,
    )


@pytest.mark.parametrize("minor", ["11", "12", "13"])
def test_single_file_build_renders_and_applies_without_the_venv(single_file, tmp_path, minor):
    python = interpreter(minor)
    target = tmp_path / "etc" / "app.conf"
    marker = tmp_path / "reloaded"
    cs = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "app",
            "spec": {
                "selector": {},
                "files": [
                    {"path": str(target.parent), "ensure": "directory"},
                    {"path": str(target), "content": "port = 80\n", "mode": "0640"},
                ],
                "executions": [
                    {
                        "command": "/bin/touch",
                        "args": [str(marker)],
                        "subscribe_files": [str(target)],
                    }
                ],
            },
        },
    )

    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    version = run(single_file, tmp_path, "--version", python=python)
    assert f"(commit {head}, " in version.stdout, version.stdout + version.stderr  # stamped

    rendered = run(single_file, tmp_path, "render", "-f", str(cs), python=python)
    assert rendered.returncode == 0, rendered.stderr
    assert "ansible.builtin.copy" in rendered.stdout

    first = run(single_file, tmp_path, "apply", "--no-fast-path", "-f", str(cs), python=python)
    assert first.returncode == 0, first.stdout + first.stderr
    assert target.read_text() == "port = 80\n" and oct(os.stat(target).st_mode & 0o777) == "0o640"
    assert marker.exists()  # the handler ran through the unpacked ansible-playbook

    again = run(single_file, tmp_path, "apply", "-f", str(cs), python=python)
    assert again.returncode == 0 and "0 changed" in again.stdout, again.stdout + again.stderr
    assert len(list((tmp_path / "unpacked").iterdir())) == 1  # unpacked once, reused


def test_single_file_says_in_one_line_what_it_needs_on_another_python(single_file, tmp_path):
    older = interpreter("10")
    result = run(single_file, tmp_path, "--version", python=older)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"nodemanager: needs CPython 3.11, 3.12, 3.13; this is cpython 3.10 ({older})"
    ]
    assert not (tmp_path / "unpacked").exists()  # refused before unpacking anything


def test_a_new_unpack_removes_the_trees_no_process_holds(single_file, tmp_path):
    """The unpacked tree is keyed by payload and Python minor; a start removes the other trees
    unless a running agent holds one (its shared lock on `.complete`, held here as an agent
    holds it)."""
    unpacked = tmp_path / "unpacked"
    stale = unpacked / "app-0123456789abcdef-cp311"  # an earlier payload's tree
    (stale / "site").mkdir(parents=True)
    (stale / ".complete").touch()
    running = unpacked / "app-fedcba9876543210-cp311"  # one a running agent still uses
    running.mkdir()
    (running / ".complete").touch()
    with (running / ".complete").open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_SH)
        first = run(single_file, tmp_path, "--version", python=interpreter("12"))
        assert first.returncode == 0, first.stderr
        names = sorted(p.name for p in unpacked.iterdir())
    assert len(names) == 2 and running.name in names, names  # the held tree stays
    assert [n for n in names if n != running.name][0].endswith("-cp312")
    second = run(single_file, tmp_path, "--version", python=interpreter("13"))
    assert second.returncode == 0, second.stderr
    names = sorted(p.name for p in unpacked.iterdir())
    assert len(names) == 1 and names[0].endswith("-cp313"), names  # released: removed
