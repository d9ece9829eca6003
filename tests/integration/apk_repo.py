"""A local apk repository and a private Alpine root, for real community.general.apk runs.

apk-tools 2.14 (tests/thirdparty.py builds it from ../shared/vendor) runs on this Debian
machine. Each host is its own root: ``apk --root ROOT`` keeps the database, world file and
payload there. Commands run in a private mount namespace that makes the host look like
Alpine to nodemanager and to the module:

- ``/etc`` gets a tmpfs overlay, so ``/etc/os-release`` says ``ID=alpine`` and the root's
  ``etc/apk`` is bound onto ``/etc/apk``: the module reads ``/etc/apk/world`` itself, not
  through apk;
- ``apk`` on PATH is a wrapper adding ``--root ROOT --allow-untrusted`` (the repository is
  unsigned; its URL is in the root's ``etc/apk/repositories``);
- apk runs a package's install scripts chrooted into the root, so the host's ``/usr`` is bound
  read-only into it (``bin``, ``lib64`` and the multiarch library directory link there) and
  ``#!/bin/sh`` runs.

Packages are v2 ``.apk`` files built here: the control tar (``.PKGINFO`` and scripts, without
end-of-archive blocks) and the data tar (directories too, each file with its
``APK-TOOLS.checksum.SHA1`` PAX header), each its own gzip stream, concatenated; ``apk
index`` makes the repository's APKINDEX.
"""

from __future__ import annotations

import gzip
import hashlib
import platform
import shlex
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import thirdparty

PACKAGE = "nmtest-hello"
ARCH = platform.machine()
# A script that fails, for the package whose installation must fail.
FAILING = "#!/bin/sh\necho 'nmtest: refusing to install' >&2\nexit 1\n"


def apk_binary() -> Path:
    """The real apk, built once (skips the test, saying what is missing, where it cannot be)."""
    reason = thirdparty.missing(thirdparty.APK)
    if reason:
        pytest.skip(reason)
    return thirdparty.build(thirdparty.APK)


def _member(info: tarfile.TarInfo, body: bytes = b"") -> bytes:
    block = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    return block + body + b"\0" * (-len(body) % 512)


def _entry(name: str, kind: bytes, size: int = 0, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, mode, 1700000000
    info.uname = info.gname = "root"
    return info


def build_apk(
    repo: Path,
    name: str,
    version: str,
    depends: tuple[str, ...] = (),
    provides: tuple[str, ...] = (),
    scripts: dict[str, str] | None = None,
) -> Path:
    """``name-version.apk`` in ``repo`` installing /opt/nmtest/<name>/VERSION; ``scripts`` maps
    apk's script names (``pre-install``, ``post-install``...) to their text."""
    body = (version.split("-")[0] + "\n").encode()
    data = b"".join(
        _member(_entry(d, tarfile.DIRTYPE, mode=0o755))
        for d in ("opt", "opt/nmtest", f"opt/nmtest/{name}")
    )
    payload = _entry(f"opt/nmtest/{name}/VERSION", tarfile.REGTYPE, len(body))
    payload.pax_headers = {"APK-TOOLS.checksum.SHA1": hashlib.sha1(body).hexdigest()}
    data += _member(payload, body) + b"\0" * 1024  # the data tar ends the package: ends itself
    data_gz = gzip.compress(data, mtime=0)
    fields = [
        f"pkgname = {name}",
        f"pkgver = {version}",
        "pkgdesc = nodemanager test package",
        "url = https://example.invalid",
        "builddate = 1700000000",
        "packager = nodemanager tests",
        f"size = {len(body)}",
        f"arch = {ARCH}",
        f"origin = {name}",
        "license = Apache-2.0",
        *(f"depend = {d}" for d in depends),
        *(f"provides = {p}" for p in provides),
        f"datahash = {hashlib.sha256(data_gz).hexdigest()}",
    ]
    pkginfo = ("\n".join(fields) + "\n").encode()
    control = _member(_entry(".PKGINFO", tarfile.REGTYPE, len(pkginfo)), pkginfo)
    for kind, text in (scripts or {}).items():
        script = text.encode()
        control += _member(_entry(f".{kind}", tarfile.REGTYPE, len(script), 0o755), script)
    package = repo / f"{name}-{version}.apk"
    package.write_bytes(gzip.compress(control, mtime=0) + data_gz)
    return package


@dataclass
class ApkRepo:
    """A repository directory: ``url/<arch>/`` holds the packages and APKINDEX.tar.gz."""

    url: Path

    @property
    def packages(self) -> Path:
        return self.url / ARCH

    def publish(
        self,
        version: str,
        name: str = PACKAGE,
        depends: tuple[str, ...] = (),
        provides: tuple[str, ...] = (),
        scripts: dict[str, str] | None = None,
    ) -> Path:
        package = build_apk(self.packages, name, version, depends, provides, scripts)
        self.index()
        return package

    def index(self) -> None:
        apks = sorted(p.name for p in self.packages.glob("*.apk"))
        argv = [str(apk_binary()), "index", "-q", "--allow-untrusted", "-o", "APKINDEX.tar.gz"]
        done = subprocess.run(
            [*argv, *apks], cwd=self.packages, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr


OS_RELEASE = 'NAME="Alpine Linux"\nID=alpine\nVERSION_ID=3.20.3\nPRETTY_NAME="Alpine (nmtest)"\n'


@dataclass
class ApkEnv:
    """Run commands as on an Alpine host whose root is ``root``."""

    root: Path
    bin: Path  # the ``apk`` wrapper's directory, first on PATH inside

    @property
    def prefix(self) -> list[str]:
        root = shlex.quote(str(self.root))
        script = f"""set -e
mount -t tmpfs tmpfs {root}/.nmtest-etc
mkdir {root}/.nmtest-etc/upper {root}/.nmtest-etc/work
mount -t overlay overlay -o lowerdir=/etc,upperdir={root}/.nmtest-etc/upper,\
workdir={root}/.nmtest-etc/work /etc
rm -f /etc/os-release && printf %s {shlex.quote(OS_RELEASE)} > /etc/os-release
mkdir /etc/apk && mount --bind {root}/etc/apk /etc/apk
mount --bind /usr {root}/usr && mount -o remount,bind,ro {root}/usr
export PATH={shlex.quote(str(self.bin))}:$PATH
exec "$@"
"""
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *argv], capture_output=True, text=True, timeout=timeout, check=False
        )

    def installed(self) -> dict[str, str]:
        """Installed packages and their versions, from apk's database."""
        out: dict[str, str] = {}
        name = ""
        db = self.root / "lib" / "apk" / "db" / "installed"
        for line in db.read_text().splitlines():
            if line.startswith("P:"):
                name = line[2:]
            elif line.startswith("V:"):
                out[name] = line[2:]
        return out

    def query(self, name: str = PACKAGE) -> str | None:
        return self.installed().get(name)

    def world(self) -> list[str]:
        return (self.root / "etc" / "apk" / "world").read_text().split()

    def payload(self, name: str = PACKAGE) -> str | None:
        path = self.root / "opt" / "nmtest" / name / "VERSION"
        return path.read_text().strip() if path.exists() else None

    def state(self) -> dict[str, object]:
        """What apk keeps (its database, stanza by stanza; the world) and what it installed."""
        db = (self.root / "lib" / "apk" / "db" / "installed").read_text()
        payload = self.root / "opt" / "nmtest"
        return {
            "installed": sorted(s.strip() for s in db.split("\n\n") if s.strip()),
            "world": sorted(self.world()),
            "payload": sorted(str(p.relative_to(payload)) for p in payload.rglob("*"))
            if payload.exists()
            else [],
        }


def make_repo(tmp_path: Path, packages: tuple[str, ...] = (PACKAGE,)) -> ApkRepo:
    repo = ApkRepo(tmp_path / "apk-repo")
    repo.packages.mkdir(parents=True)
    for name in (*packages, "nmtest-base"):
        build_apk(repo.packages, name, "1.0-r0")
    repo.index()
    return repo


def make_env(tmp_path: Path, repo: ApkRepo) -> ApkEnv:
    """A fresh root with apk's database initialised and ``nmtest-base`` installed (a real host
    has packages), its repositories file naming ``repo``."""
    apk = apk_binary()
    root = tmp_path / "alpine-root"
    for d in ("etc/apk", "usr", ".nmtest-etc"):
        (root / d).mkdir(parents=True)
    # what the chroot of an install script needs: /bin/sh and the C library, from /usr
    (root / "lib").mkdir()
    for link, target in (("bin", "usr/bin"), ("lib64", "usr/lib64")):
        (root / link).symlink_to(target)
    multiarch = f"{ARCH}-linux-gnu"
    (root / "lib" / multiarch).symlink_to(f"../usr/lib/{multiarch}")
    (root / "etc" / "apk" / "arch").write_text(ARCH + "\n")
    (root / "etc" / "apk" / "repositories").write_text(f"{repo.url}\n")
    wrapper = tmp_path / "alpine-bin"
    wrapper.mkdir()
    (wrapper / "apk").write_text(
        f"#!/bin/sh\nexec {shlex.quote(str(apk))} --root {shlex.quote(str(root))} "
        '--allow-untrusted "$@"\n'
    )
    (wrapper / "apk").chmod(0o755)
    env = ApkEnv(root, wrapper)
    done = env.run("apk", "add", "--initdb", "nmtest-base")
    assert done.returncode == 0, done.stdout + done.stderr
    return env


@pytest.fixture
def apk_repo(tmp_path: Path) -> ApkRepo:
    return make_repo(tmp_path)


@pytest.fixture
def apk_env(tmp_path: Path, apk_repo: ApkRepo) -> ApkEnv:
    return make_env(tmp_path, apk_repo)
