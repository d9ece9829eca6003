"""nodemanager/versionscheme.py: git's description as a release version, and its spelling in
each distribution's grammar ranked by that distribution's own comparison: dpkg
--compare-versions, pacman's vercmp (Debian's pacman-package-manager), and the real apk and
FreeBSD pkg built from ../shared/vendor (tests/thirdparty.py; skipped in one line without them).
Two consecutive commits of a clone of this repository are described as a release build
describes them and must rank in order in every grammar."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.version import Version as Pep440

from nodemanager.version import from_git
from nodemanager.versionscheme import Version, VersionError
from tests import thirdparty

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("described", "commits", "version"),
    [
        ("v1.2.0-0-g0123456789ab", 9, "1.2.0"),
        ("v1.2.0-3-g0123456789ab", 9, "1.2.1.dev3+g0123456789ab"),
        ("v1.2.0-0-g0123456789ab-dirty", 9, "1.2.0+dirty"),
        ("v1.2.0-3-g0123456789ab-dirty", 9, "1.2.1.dev3+g0123456789ab.dirty"),
        ("v0.1.0-3-g0123456789ab", 9, "0.2.0.dev3+g0123456789ab"),  # the package's floor
        ("0123456789ab", 332, "0.2.0.dev332+g0123456789ab"),  # no tag: counted from the root
        ("0123456789ab-dirty", 332, "0.2.0.dev332+g0123456789ab.dirty"),
    ],
)
def test_git_description_becomes_a_pep440_version(described, commits, version):
    parsed = Version.from_git(described, commits, "0.2.0")
    assert parsed.pep440() == version and Version.parse(version) == parsed


@pytest.mark.parametrize("text", ["v1.2", "1.2.0rc1", "1.2.0+3.gabc"])
def test_what_the_scheme_did_not_write_is_refused(text):
    with pytest.raises(VersionError):
        Version.parse(text)


# Each consecutive pair must rank lower-first. Development builds of a release, a modified tree
# after its clean commit, the release itself, then the next release's development builds.
SEQUENCE = [
    "0.2.0.dev9+g0123456789ab",
    "0.2.0.dev9+g0123456789ab.dirty",
    "0.2.0.dev10+gba9876543210",
    "0.2.0.dev332+g0123456789ab",
    "0.2.0",
    "0.2.0+dirty",
    "0.2.1.dev1+g0123456789ab",
    "0.2.1.dev2+gfedcba987654",
    "0.3.0.dev3+g0123456789ab",
    "0.3.0",
    "1.0.0.dev1+g0123456789ab",
    "1.0.0",
    "10.0.0",
]


def _dpkg(a: str, b: str) -> bool:
    return subprocess.run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0


def _vercmp(a: str, b: str) -> bool:
    out = subprocess.run(["vercmp", a, b], capture_output=True, text=True, check=True).stdout
    return out.strip() == "-1"


def _apk(a: str, b: str) -> bool:
    apk = thirdparty.build(thirdparty.APK)
    for v in (a, b):  # `apk version -c` prints what its grammar refuses
        assert subprocess.run([apk, "version", "-c", v], capture_output=True).returncode == 0, v
    out = subprocess.run([apk, "version", "-t", a, b], capture_output=True, text=True).stdout
    return out.strip() == "<"


def _pkg(a: str, b: str) -> bool:
    pkg = thirdparty.build(thirdparty.PKG)
    env = {**os.environ, "LD_LIBRARY_PATH": str(thirdparty.PKG.prefix() / "lib")}
    out = subprocess.run(
        [pkg, "version", "-t", a, b], capture_output=True, text=True, env=env, check=True
    ).stdout
    return out.strip() == "<"


def _pep440(a: str, b: str) -> bool:
    return Pep440(a) < Pep440(b)


def _needs(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} missing: `make deps` installs it")


def _needs_program(program: thirdparty.Program) -> None:
    reason = thirdparty.missing(program)
    if reason:
        pytest.skip(reason)


COMPARISONS: dict[str, tuple[Callable[[Version], str], Callable[[str, str], bool], Callable]] = {
    "pep440": (Version.pep440, _pep440, lambda: None),
    "dpkg": (Version.dpkg, _dpkg, lambda: _needs("dpkg")),
    "pacman-vercmp": (Version.pacman, _vercmp, lambda: _needs("vercmp")),
    "apk": (Version.apk, _apk, lambda: _needs_program(thirdparty.APK)),
    "freebsd-pkg": (Version.freebsd, _pkg, lambda: _needs_program(thirdparty.PKG)),
}


@pytest.mark.parametrize("grammar", sorted(COMPARISONS))
def test_consecutive_versions_rank_in_order_by_each_distributions_comparison(grammar):
    spell, lower, needs = COMPARISONS[grammar]
    needs()
    spelled = [spell(Version.parse(v)) for v in SEQUENCE]
    out_of_order = [(a, b) for a, b in zip(spelled, spelled[1:], strict=False) if not lower(a, b)]
    assert not out_of_order, f"{grammar} ranks these not lower-first: {out_of_order}"


@pytest.fixture(scope="module")
def consecutive(tmp_path_factory) -> list[Version]:
    """A clone of this repository described at HEAD, with its work tree modified, and after
    one more commit: three consecutive builds, as a release build describes them."""
    clone = tmp_path_factory.mktemp("clone") / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    author = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org"}
    author |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    found = []
    for step in ("clean", "dirty", "next"):
        if step == "dirty":
            (clone / "README.md").write_text("modified\n")
        if step == "next":
            commit = ["git", "-C", str(clone), "commit", "-qam", "next"]
            subprocess.run(commit, check=True, env={**os.environ, **author})
        info = from_git(clone)
        assert info is not None
        found.append(info.scheme())
    return found


@pytest.mark.parametrize("grammar", sorted(COMPARISONS))
def test_two_consecutive_release_builds_rank_in_order(consecutive, grammar):
    spell, lower, needs = COMPARISONS[grammar]
    needs()
    clean, dirty, following = (spell(v) for v in consecutive)
    assert consecutive[0].dev is not None and consecutive[2].dev == consecutive[0].dev + 1
    assert consecutive[1].dirty and "dirty" in consecutive[1].pep440()  # a modified tree says so
    assert lower(clean, dirty) and lower(dirty, following), (clean, dirty, following)
