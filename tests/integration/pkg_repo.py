"""A local pkg repository and a private FreeBSD root, for real community.general.pkgng runs.

FreeBSD's pkg 2.8 (tests/thirdparty.py builds it from ../shared/vendor, with its libraries)
runs on this Debian machine. Each host is its own root, pkg's rootdir (``pkg -r ROOT``): its
database under ``ROOT/var/db/pkg``, the payload under ``ROOT/opt/nmtest``. Commands run in a
private mount namespace whose ``/etc`` is a tmpfs overlay, so ``/etc/os-release`` says
``ID=freebsd``; ``pkg`` on PATH is a wrapper adding the root, the ABI of the packages
(FreeBSD:14:amd64; pkg cannot read one from Linux) and the directory of the test's repository
configuration. Install scripts run through the host's /bin/sh, as pkg runs them with a
rootdir.

Packages are made by ``pkg create`` from a manifest and a staged tree, the repository's
catalogue by ``pkg repo``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import thirdparty

PACKAGE = "nmtest-hello"
ABI = "FreeBSD:14:amd64"
OSVERSION = "1400000"  # given with the ABI, or pkg guesses it aloud on every call
# A script that fails, for the package whose installation must fail.
FAILING = "echo 'nmtest: refusing to install' >&2\nexit 1\n"


def pkg_binary() -> Path:
    """The real pkg, built once (skips the test, saying what is missing, where it cannot be)."""
    reason = thirdparty.missing(thirdparty.PKG)
    if reason:
        pytest.skip(reason)
    return thirdparty.build(thirdparty.PKG)


def _pkg_env() -> dict[str, str]:
    lib = thirdparty.PKG.prefix() / "lib"
    return {**os.environ, "LD_LIBRARY_PATH": str(lib), "ASSUME_ALWAYS_YES": "yes"}


def _run_pkg(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = (str(pkg_binary()), "-o", f"ABI={ABI}", "-o", f"OSVERSION={OSVERSION}", *argv)
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=_pkg_env())


@dataclass
class PkgRepo:
    workdir: Path
    repo: Path  # the packages (All/) and the catalogue

    def publish(
        self,
        version: str,
        name: str = PACKAGE,
        depends: tuple[str, ...] = (),
        provides: tuple[str, ...] = (),
        requires: tuple[str, ...] = (),
        scripts: dict[str, str] | None = None,
        catalogue: bool = True,
    ) -> Path:
        """``name-version.pkg`` installing /opt/nmtest/<name>/VERSION; ``depends`` are names
        published at 1.0; ``scripts`` maps pkg's script names (``pre-install``...) to text."""
        stage = self.workdir / f"pkg-build-{name}-{version}"
        payload = stage / "opt" / "nmtest" / name
        payload.mkdir(parents=True)
        (payload / "VERSION").write_text(version.split("_")[0] + "\n")
        manifest = {
            "name": name,
            "version": version,
            "origin": f"nmtest/{name}",
            "comment": "nodemanager test package",
            "desc": "nodemanager test package",
            "maintainer": "t@example.invalid",
            "www": "https://example.invalid",
            "prefix": "/opt/nmtest",
            "abi": ABI,
            "deps": {d: {"origin": f"nmtest/{d}", "version": "1.0"} for d in depends},
            **({"provides": list(provides)} if provides else {}),
            **({"requires": list(requires)} if requires else {}),
            **({"scripts": scripts} if scripts else {}),
        }
        (stage / "+MANIFEST").write_text(json.dumps(manifest))
        plist = stage / "plist"
        plist.write_text(f"/opt/nmtest/{name}/VERSION\n")
        out = self.repo / "All"
        out.mkdir(exist_ok=True)
        made = _run_pkg(
            "create", "-M", str(stage / "+MANIFEST"), "-r", str(stage), "-p", str(plist),
            "-o", str(out),
        )  # fmt: skip
        assert made.returncode == 0, made.stdout + made.stderr
        if catalogue:
            self.catalogue()
        return out / f"{name}-{version}.pkg"

    def catalogue(self) -> None:
        done = _run_pkg("repo", str(self.repo))
        assert done.returncode == 0, done.stdout + done.stderr


OS_RELEASE = 'NAME=FreeBSD\nID=freebsd\nVERSION_ID=14.1\nPRETTY_NAME="FreeBSD (nmtest)"\n'


@dataclass
class PkgEnv:
    """Run commands as on a FreeBSD host whose root is ``root``."""

    root: Path
    bin: Path  # the ``pkg`` wrapper's directory, first on PATH inside

    @property
    def prefix(self) -> list[str]:
        etc = shlex.quote(str(self.bin.parent / "etc-overlay"))
        script = f"""set -e
mount -t tmpfs tmpfs {etc}
mkdir {etc}/upper {etc}/work
mount -t overlay overlay -o lowerdir=/etc,upperdir={etc}/upper,workdir={etc}/work /etc
rm -f /etc/os-release && printf %s {shlex.quote(OS_RELEASE)} > /etc/os-release
export PATH={shlex.quote(str(self.bin))}:$PATH
exec "$@"
"""
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *argv], capture_output=True, text=True, timeout=timeout, check=False
        )

    def pkg(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """pkg on this root, from the host (no namespace needed to read it)."""
        return subprocess.run(
            [str(self.bin / "pkg"), *argv], capture_output=True, text=True, check=False
        )

    def installed(self) -> dict[str, str]:
        """Installed packages and their versions."""
        out = self.pkg("query", "%n %v").stdout.split("\n")
        return dict(line.split(" ", 1) for line in out if line)

    def query(self, name: str = PACKAGE) -> str | None:
        return self.installed().get(name)

    def payload(self, name: str = PACKAGE) -> str | None:
        path = self.root / "opt" / "nmtest" / name / "VERSION"
        return path.read_text().strip() if path.exists() else None

    def state(self) -> dict[str, object]:
        """Installed packages with version, automatic mark and dependencies, and the payload."""
        rows = self.pkg("query", "%n %v automatic=%a").stdout.splitlines()
        deps = self.pkg("query", "%n needs %dn").stdout.splitlines()
        payload = self.root / "opt" / "nmtest"
        return {
            "installed": sorted(rows),
            "deps": sorted(deps),
            "payload": sorted(str(p.relative_to(payload)) for p in payload.rglob("*"))
            if payload.exists()
            else [],
        }


def make_repo(tmp_path: Path, packages: tuple[str, ...] = (PACKAGE,)) -> PkgRepo:
    repo = PkgRepo(tmp_path, tmp_path / "pkg-repo")
    repo.repo.mkdir()
    for name in (*packages, "nmtest-base"):
        repo.publish("1.0", name=name, catalogue=False)
    repo.catalogue()
    return repo


def make_env(tmp_path: Path, repo: PkgRepo) -> PkgEnv:
    """A fresh root whose only repository is ``repo``, with ``nmtest-base`` installed."""
    pkg = pkg_binary()
    root = tmp_path / "freebsd-root"
    (root / "var" / "db" / "pkg").mkdir(parents=True)
    repos = tmp_path / "freebsd-repos"
    repos.mkdir()
    (repos / "nmtest.conf").write_text(
        f'nmtest: {{ url: "file://{repo.repo}", signature_type: "none", enabled: yes }}\n'
    )
    (tmp_path / "etc-overlay").mkdir()
    wrapper = tmp_path / "freebsd-bin"
    wrapper.mkdir()
    lib = thirdparty.PKG.prefix() / "lib"
    options = ["-r", str(root), "-o", f"ABI={ABI}", "-o", f"OSVERSION={OSVERSION}"]
    options += ["-o", f"REPOS_DIR={repos}"]
    (wrapper / "pkg").write_text(
        f"#!/bin/sh\nLD_LIBRARY_PATH={shlex.quote(str(lib))} exec {shlex.quote(str(pkg))} "
        + " ".join(shlex.quote(o) for o in options)
        + ' "$@"\n'
    )
    (wrapper / "pkg").chmod(0o755)
    env = PkgEnv(root, wrapper)
    for argv in (("update",), ("install", "-y", "nmtest-base")):
        done = env.pkg(*argv)
        assert done.returncode == 0, done.stdout + done.stderr
    return env


@pytest.fixture
def pkg_repo(tmp_path: Path) -> PkgRepo:
    return make_repo(tmp_path)


@pytest.fixture
def pkg_env(tmp_path: Path, pkg_repo: PkgRepo) -> PkgEnv:
    return make_env(tmp_path, pkg_repo)
