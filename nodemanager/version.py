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
from dataclasses import dataclass
from pathlib import Path

from nodemanager import __version__
from nodemanager.versionscheme import Version

STAMP = Path(__file__).with_name("_build.json")
UNKNOWN = "unknown"


@dataclass(frozen=True)
class BuildInfo:
    version: str  # PEP 440 (nodemanager/versionscheme.py): --version and status.agentVersion
    commit: str
    date: str

    def line(self) -> str:
        return f"nodemanager {self.version} (commit {self.commit}, {self.date})"

    def scheme(self) -> Version:
        """The version as the scheme's value, for each distribution's spelling of it."""
        return Version.parse(self.version)


def _git(root: Path, *args: str) -> str:
    import subprocess  # only in a checkout: an installed CLI reads the stamp (bench/cli_start.py)

    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=10
    ).stdout.strip()


def from_git(root: Path) -> BuildInfo | None:
    """The checkout's build info: its version by the scheme (the last v* tag, the commits since
    it or since the root, a modified tree), the full commit and its ISO 8601 commit date."""
    if not (root / ".git").exists():
        return None
    import subprocess

    try:
        commit, date = _git(root, "log", "-1", "--format=%H %cI").split()
        described = _git(
            root, "describe", "--tags", "--long", "--dirty", "--always", "--abbrev=12",
            "--match", "v[0-9]*.[0-9]*.[0-9]*",
        )  # fmt: skip
        commits = int(_git(root, "rev-list", "--count", "HEAD"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return BuildInfo(Version.from_git(described, commits, __version__).pep440(), commit, date)


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
