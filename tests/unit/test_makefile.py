"""The Makefile's housekeeping as a new user meets it (issue 24): `make clean` removes only what
the build made, and `make deps` installs Debian packages without their recommends."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _dry_run(target: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target], capture_output=True, text=True, check=True
    )
    return done.stdout


def test_clean_removes_no_tracked_file():
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    removed: list[str] = []
    for line in _dry_run("clean").splitlines():
        words = shlex.split(line)
        if words[:2] == ["rm", "-rf"]:
            removed += words[2:]
    assert removed, "make clean removes nothing"
    for path in removed:
        assert not any(f == path or f.startswith(path.rstrip("/") + "/") for f in tracked), path
    # the collections it installs go; the project's own (tracked) collection stays
    assert "! -name nodemanager" in _dry_run("clean")


def test_deps_installs_without_recommends():
    text = (ROOT / "Makefile").read_text()
    installs = [line for line in text.splitlines() if "apt-get install" in line]
    assert installs and all("--no-install-recommends" in line for line in installs)


def test_unit_tests_install_the_collections_they_read_first():
    # A fresh clone has none: the argspec tests read community.general's and ansible's specs.
    assert "collections/install.py" in _dry_run("test-unit")
