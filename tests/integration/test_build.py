"""`make build`: bin/nodemanager is one file that runs on a Python with nothing installed."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import write_configsets

pytestmark = pytest.mark.ansible
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def single_file(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build") / "nodemanager"
    subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "build.py"), str(out)],
        check=True,
        capture_output=True,
    )
    return out


def run(binary: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    # `python -I -S`: no site-packages and no user paths, so nothing of the venv can help it.
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "NODEMANAGER_UNPACK_DIR": str(tmp / "unpacked"),
    }
    return subprocess.run(
        [sys.executable, "-I", "-S", str(binary), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=300,
    )


def test_single_file_build_renders_and_applies_without_the_venv(single_file, tmp_path):
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

    rendered = run(single_file, tmp_path, "render", "-f", str(cs))
    assert rendered.returncode == 0, rendered.stderr
    assert "ansible.builtin.copy" in rendered.stdout

    first = run(single_file, tmp_path, "apply", "--no-fast-path", "-f", str(cs))
    assert first.returncode == 0, first.stdout + first.stderr
    assert target.read_text() == "port = 80\n" and oct(os.stat(target).st_mode & 0o777) == "0o640"
    assert marker.exists()  # the handler ran through the unpacked ansible-playbook

    again = run(single_file, tmp_path, "apply", "-f", str(cs))
    assert again.returncode == 0 and "0 changed" in again.stdout, again.stdout + again.stderr
    assert len(list((tmp_path / "unpacked").iterdir())) == 1  # unpacked once, reused
