"""Which build this is: version, git commit and commit date, for `--version` and
`nodemanager_build_info`. Standard library only, no I/O at import (the CLI starts fast).

A release build (deploy/build.py, `make release`) writes `_build.json` beside this module, from
git at build time; the file is the only source for an installed copy, which has no git. A
checkout without it asks git once, when first needed; with neither, commit and date are
"unknown" rather than a guess.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from nodemanager import __version__

STAMP = Path(__file__).with_name("_build.json")
# `git describe --tags --dirty`: TAG, then -COUNT-gHASH after a tag, then -dirty.
DESCRIBED = re.compile(
    r"^v?(?P<tag>.+?)(?:-(?P<count>\d+)-g(?P<hash>[0-9a-f]+))?(?:-(?P<dirty>dirty))?$"
)
UNKNOWN = "unknown"


@dataclass(frozen=True)
class BuildInfo:
    version: str
    commit: str
    date: str

    def line(self) -> str:
        return f"nodemanager {self.version} (commit {self.commit}, {self.date})"


def from_git(root: Path) -> BuildInfo | None:
    """The checkout's build info: `git describe` of a v* tag as a PEP 440 version (else the
    package version with the short commit as local version), the full commit and its ISO 8601
    commit date."""
    if not (root / ".git").exists():
        return None
    import subprocess  # only in a checkout: an installed CLI reads the stamp (bench/cli_start.py)

    try:
        commit, date = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%H %cI"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.split()
        described = subprocess.run(
            ["git", "-C", str(root), "describe", "--tags", "--match", "v[0-9]*", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    if described.returncode == 0:
        version = pep440(described.stdout.strip())
    else:
        version = f"{__version__}+g{commit[:12]}"
    return BuildInfo(version, commit, date)


def pep440(described: str) -> str:
    """`git describe` output as a PEP 440 version (the wheel, the sdist and pip compare it):
    `v1.2.0` is 1.2.0; what git appends after a tag (`-3-gabc1234`, `-dirty`) becomes the
    local version, `1.2.0+3.gabc1234.dirty`."""
    m = DESCRIBED.match(described)
    if m is None:
        return described.removeprefix("v")
    local = [p for p in (m["count"], m["hash"] and f"g{m['hash']}", m["dirty"]) if p]
    return m["tag"] + ("+" + ".".join(local) if local else "")


def read_stamp(path: Path) -> BuildInfo | None:
    try:
        raw = json.loads(path.read_text())
        return BuildInfo(str(raw["version"]), str(raw["commit"]), str(raw["date"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@functools.cache
def build_info() -> BuildInfo:
    return (
        read_stamp(STAMP)
        or from_git(Path(__file__).resolve().parents[1])
        or BuildInfo(__version__, UNKNOWN, UNKNOWN)
    )


def release_info(root: Path) -> BuildInfo:
    """What a build from the source tree at root is: git's answer in a checkout, else the stamp
    an sdist carries (it has no git), else the package version with commit and date unknown."""
    return (
        from_git(root)
        or read_stamp(root / "nodemanager" / STAMP.name)
        or BuildInfo(__version__, UNKNOWN, UNKNOWN)
    )


def stamp(target: Path, root: Path) -> BuildInfo:
    """Write release_info(root) as `_build.json` into the nodemanager package at target (the
    build's copy), temporary file then rename."""
    info = release_info(root)
    partial = target / "_build.json.partial"
    partial.write_text(json.dumps(info.__dict__, sort_keys=True) + "\n")
    partial.rename(target / "_build.json")
    return info
