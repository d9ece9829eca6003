"""Release versions and their spelling in each distribution's grammar. Pure, standard library
only (the CLI and the build hook import it before anything is installed).

A version is a release X.Y.Z, or a development build of the next release: git's tag `vX.Y.Z` is
X.Y.Z; a commit N commits past that tag is a development build of X.Y.(Z+1) (or of the package
version, when that is newer: a minor bump is made by raising ``nodemanager.__version__``), and
with no tag at all a development build of the package version, N counted from the root. The
counter only grows along a branch, so consecutive builds sort in order; a development build of
X.Y.Z sorts before X.Y.Z itself, and a tree with uncommitted changes after its clean commit and
before the next one. Each distribution has its own grammar for "before the release" and
"after"; the forms below are chosen so that dpkg, pacman's vercmp, apk and FreeBSD's pkg rank
them as PEP 440 does (tests/unit/test_versionscheme.py asks each program).

The abbreviated commit travels in PEP 440's local label and dpkg's and pacman's versions;
apk's and FreeBSD's grammars have no place for it (the commit is in ``--version`` and the SBOM).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What `git describe --tags --long --dirty --always --abbrev=12 --match v*` prints: a tag with
# its distance and commit, or (no tag) the commit alone; then -dirty.
DESCRIBED = re.compile(
    r"^(?:v(?P<tag>\d+\.\d+\.\d+)-(?P<count>\d+)-g)?(?P<hash>[0-9a-f]{4,40})(?P<dirty>-dirty)?$"
)
# The PEP 440 forms this module writes (and reads back from a build stamp).
PEP440 = re.compile(
    r"^(?P<release>\d+\.\d+\.\d+)(?:\.dev(?P<dev>\d+))?"
    r"(?:\+(?:g(?P<hash>[0-9a-f]+))?\.?(?P<dirty>dirty)?)?$"
)


class VersionError(ValueError):
    """Text that is no version of this scheme."""


def _triple(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(p) for p in text.split("."))
    return major, minor, patch


@dataclass(frozen=True)
class Version:
    """One build's version. ``dev`` is None for a tagged release, else the commit counter."""

    release: tuple[int, int, int]
    dev: int | None = None
    commit: str = ""  # abbreviated commit of a development build
    dirty: bool = False

    @classmethod
    def from_git(cls, described: str, commits: int, package: str) -> Version:
        """From `git describe` (``DESCRIBED``), the number of commits in HEAD's history (used
        when there is no tag) and the package version (the next release's floor)."""
        m = DESCRIBED.match(described.strip())
        if m is None:
            raise VersionError(f"git describe said {described!r}: not vX.Y.Z-N-gHASH or HASH")
        floor, dirty = _triple(package), bool(m["dirty"])
        if m["tag"] is None:
            return cls(floor, commits, m["hash"], dirty)
        tag = _triple(m["tag"])
        if int(m["count"]) == 0:
            return cls(tag, None, "", dirty)
        following = (tag[0], tag[1], tag[2] + 1)
        return cls(max(following, floor), int(m["count"]), m["hash"], dirty)

    @classmethod
    def parse(cls, text: str) -> Version:
        """A PEP 440 string this scheme wrote (``pep440()``)."""
        m = PEP440.match(text)
        if m is None:
            raise VersionError(f"{text!r} is not X.Y.Z[.devN][+gHASH][.dirty]")
        dev = int(m["dev"]) if m["dev"] is not None else None
        return cls(_triple(m["release"]), dev, m["hash"] or "", bool(m["dirty"]))

    @property
    def base(self) -> str:
        return ".".join(map(str, self.release))

    def _local(self) -> list[str]:
        """What follows the release: the commit of a development build, a modified tree."""
        commit = [f"g{self.commit}"] if self.dev is not None and self.commit else []
        return commit + ["dirty"] * self.dirty

    def pep440(self) -> str:
        """The Python version (wheel, sdist, ``--version``, status.agentVersion):
        `1.2.0`, `1.2.1.dev3+gabc123def456`, `...+gabc123def456.dirty`."""
        dev = f".dev{self.dev}" if self.dev is not None else ""
        local = ".".join(self._local())
        return f"{self.base}{dev}{'+' + local if local else ''}"

    def dpkg(self) -> str:
        """Debian's upstream version: `~` sorts before the end of the string, `+` after it:
        `1.2.1~dev3+gabc123def456`, `1.2.0+dirty`."""
        dev = f"~dev{self.dev}" if self.dev is not None else ""
        local = ".".join(self._local())
        return f"{self.base}{dev}{'+' + local if local else ''}"

    def pacman(self) -> str:
        """pkgver for vercmp (rpmvercmp): letters glued to the release sort before it
        (`1.2.1dev3` < `1.2.1`), a further `.`-segment after it; no `-` or `:` allowed."""
        dev = f"dev{self.dev}" if self.dev is not None else ""
        return ".".join([f"{self.base}{dev}", *self._local()])

    def apk(self) -> str:
        """apk's grammar: `_pre` sorts before the release, `_git` after what it follows:
        `1.2.1_pre3`, `1.2.1_pre3_git` for a modified tree."""
        dev = f"_pre{self.dev}" if self.dev is not None else ""
        return f"{self.base}{dev}{'_git' if self.dirty else ''}"

    def freebsd(self) -> str:
        """PORTVERSION for pkg's comparison: `.pre` sorts before the release; a component of
        letters alone sorts before none (pkg 2.8 ranks `1.0.pl1` below `1.0`), so a modified
        tree is `.1dirty`, a number first; no `-`, `_` or `,`: `1.2.1.pre3`, `1.2.1.pre3.1dirty`."""
        dev = f".pre{self.dev}" if self.dev is not None else ""
        return f"{self.base}{dev}{'.1dirty' if self.dirty else ''}"
