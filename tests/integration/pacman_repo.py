"""A local pacman repository and a private pacman state, for real community.general.pacman runs.

Debian ships pacman, so the real package manager runs here. Isolation comes from a mount
namespace: the test's pacman.conf, database, cache and payload directory are bind-mounted over
/etc/pacman.conf, /var/lib/pacman, /var/cache/pacman/pkg and /opt/nmtest for one command, so the
playbook nodemanager renders runs unchanged and nothing lands on the host. Packages are built
by hand (.PKGINFO + payload, then repo-add): makepkg refuses to run as root.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "nmtest-hello"


def build_package(
    workdir: Path,
    repo: Path,
    name: str,
    version: str,
    depends: tuple[str, ...] = (),
    groups: tuple[str, ...] = ("nmtest",),
    provides: tuple[str, ...] = (),
) -> Path:
    """Build ``name-version-any.pkg.tar.gz`` installing /opt/nmtest/<name>/VERSION; add it."""
    root = workdir / f"build-{name}-{version}"
    payload = root / "opt" / "nmtest" / name
    payload.mkdir(parents=True)
    (payload / "VERSION").write_text(version.split("-")[0] + "\n")
    (root / ".PKGINFO").write_text(
        "\n".join(
            [
                f"pkgname = {name}",
                f"pkgbase = {name}",
                f"pkgver = {version}",
                "pkgdesc = nodemanager test package",
                "url = https://example.invalid",
                "builddate = 1700000000",
                "packager = nodemanager tests",
                "size = 4",
                "arch = any",
                "license = Apache",
                # The pacman module lists groups first (`pacman -Sgg`),
                # which fails when no repo has any.
                *(f"group = {g}" for g in groups),
                *(f"depend = {d}" for d in depends),
                *(f"provides = {p}" for p in provides),
            ]
        )
        + "\n"
    )
    package = repo / f"{name}-{version}-any.pkg.tar.gz"
    subprocess.run(["bsdtar", "-czf", str(package), "-C", str(root), ".PKGINFO", "opt"], check=True)
    subprocess.run(
        ["repo-add", "-q", str(repo / "nmtest.db.tar.gz"), str(package)],
        check=True,
        capture_output=True,
    )
    return package


@dataclass
class PacmanRepo:
    workdir: Path
    repo: Path

    def publish(self, version: str, name: str = PACKAGE, **kw: tuple[str, ...]) -> Path:
        return build_package(self.workdir, self.repo, name, version, **kw)


@dataclass
class PacmanEnv:
    """Run commands with the test's pacman state in place of the host's."""

    conf: Path
    db: Path
    cache: Path
    payload_root: Path

    @property
    def prefix(self) -> list[str]:
        mounts = " && ".join(
            f"mount --bind {shlex.quote(str(src))} {dst}"
            for src, dst in (
                (self.conf, "/etc/pacman.conf"),
                (self.db, "/var/lib/pacman"),
                (self.cache, "/var/cache/pacman/pkg"),
                (self.payload_root, "/opt/nmtest"),
            )
        )
        # The sync database is refreshed as on a host that ran `pacman -Sy` lately; -Syy, since
        # -Sy compares whole-second mtimes and skips a database republished in the same second.
        script = (
            f"mkdir -p /var/cache/pacman/pkg /opt/nmtest && {mounts}"
            ' && pacman -Syy --noconfirm >/dev/null && exec "$@"'
        )
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.prefix, *argv], capture_output=True, text=True, timeout=timeout
        )

    def query(self, name: str = PACKAGE) -> str | None:
        """The installed version, or None."""
        result = self.run("pacman", "-Q", name)
        return result.stdout.split()[1] if result.returncode == 0 else None

    def payload(self, name: str = PACKAGE) -> str | None:
        path = self.payload_root / name / "VERSION"
        return path.read_text().strip() if path.exists() else None


def make_repo(tmp_path: Path, packages: tuple[str, ...] = (PACKAGE,)) -> PacmanRepo:
    repo = tmp_path / "repo"
    repo.mkdir()
    r = PacmanRepo(tmp_path, repo)
    for name in (*packages, "nmtest-base", "nmtest-dep"):
        r.publish("1.0-1", name=name)
    return r


def make_env(tmp_path: Path, pacman_repo: PacmanRepo) -> PacmanEnv:
    conf = tmp_path / "pacman.conf"
    conf.write_text(
        "[options]\nArchitecture = auto\nSigLevel = Never\nLocalFileSigLevel = Never\n\n"
        f"[nmtest]\nSigLevel = Never\nServer = file://{pacman_repo.repo}\n"
    )
    env = PacmanEnv(conf, tmp_path / "db", tmp_path / "cache", tmp_path / "opt-nmtest")
    for d in (env.db, env.cache, env.payload_root):
        d.mkdir()
    # A real host has packages installed explicitly and as dependencies; the module lists both
    # (`pacman --query --explicit`, `--deps`), and pacman exits 1 when such a list is empty.
    for extra in ([], ["--asdeps"]):
        name = "nmtest-dep" if extra else "nmtest-base"
        installed = env.run("pacman", "-S", "--noconfirm", *extra, name)
        assert installed.returncode == 0, installed.stderr
    return env


@pytest.fixture
def pacman_repo(tmp_path) -> PacmanRepo:
    return make_repo(tmp_path)


@pytest.fixture
def pacman_env(tmp_path, pacman_repo) -> PacmanEnv:
    return make_env(tmp_path, pacman_repo)
