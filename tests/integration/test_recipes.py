"""The distribution recipes `make release` writes (deploy/recipes.py), from the release the tests
share (tests/artifacts.py: this machine's glibc file and a musl file of the other architecture).

- Arch: makepkg (Debian's) builds the package as a non-root user from dist/'s PKGBUILD, its
  checksums verified by makepkg; the package's file list is read back with bsdtar.
- Alpine: no abuild here. The APKBUILD is sourced by a POSIX shell as abuild sources it, its
  checksums checked as abuild's fetch checks them (sha512sum -c), and its package() run into a
  directory whose tree is asserted.
- FreeBSD: no ports tree here. The port Makefile is read by bmake (FreeBSD's make) with an empty
  bsd.port.mk: its values, its post-install target (make -n), distinfo against the sdist, and
  RUN_DEPENDS against pyproject.toml's dependencies.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path

import pytest

from nodemanager.versionscheme import Version
from tests import artifacts
from tests.artifacts import ARCH, OTHER

pytestmark = pytest.mark.ansible
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))
import recipes  # noqa: E402  (deploy/recipes.py)

SERVICE_LINE = "ExecStart=/usr/bin/nodemanager --kubeconfig /etc/nodemanager/kubeconfig"


@pytest.fixture(scope="module")
def dist() -> Path:
    return artifacts.release()


def release_version(dist: Path) -> str:
    agent = next(dist.glob(f"nodemanager-*-linux-{ARCH}"))
    return agent.name.removeprefix("nodemanager-").removesuffix(f"-linux-{ARCH}")


def forms(version: str) -> Version:
    """The release's version as the scheme's value (nodemanager/versionscheme.py)."""
    return Version.parse(version)


def run(*argv: str | Path, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], capture_output=True, **{"text": True, **kw})
    assert done.returncode == 0, f"{argv}: {done.stdout[-3000:]!r}{done.stderr[-3000:]!r}"
    return done


@pytest.fixture
def user_dir():
    """A directory of nobody's own that nobody can reach (pytest's tmp_path is under a 0700
    directory of root's)."""
    if os.geteuid() != 0:
        pytest.skip("makepkg refuses root: the test runs it as nobody, which needs root")
    path = Path(tempfile.mkdtemp(prefix="nodemanager-makepkg-"))
    shutil.chown(path, "nobody")
    yield path
    shutil.rmtree(path)


def test_makepkg_builds_the_arch_package_as_a_user(dist, user_dir):
    assert shutil.which("makepkg"), "makepkg missing: `make deps` installs Debian's makepkg"
    version = release_version(dist)
    agent = f"nodemanager-{version}-linux-{ARCH}"
    build = user_dir
    for name in ("PKGBUILD", "nodemanager.service", agent):
        shutil.copy2(dist / name, build / name)
        shutil.chown(build / name, "nobody")
    run("bash", "-n", build / "PKGBUILD")
    # PKGEXT: no compression of 40 MB the test only lists; --nodeps: Debian has no Arch python
    env = {"PATH": "/usr/bin:/bin", "HOME": str(build), "PKGEXT": ".pkg.tar"}
    run("runuser", "-u", "nobody", "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
        "makepkg", "--nodeps", "--noconfirm", "--noprogressbar", cwd=build)  # fmt: skip
    package = build / f"nodemanager-bin-{forms(version).pacman()}-1-{ARCH}.pkg.tar"
    listing = run("bsdtar", "-tvf", package).stdout.splitlines()
    entries = {line.split()[-1]: line.split()[0] for line in listing}
    assert {name for name in entries if not name.startswith(".")} == {
        "etc/",
        "etc/nodemanager/",
        "usr/",
        "usr/bin/",
        "usr/bin/nodemanager",
        "usr/lib/",
        "usr/lib/systemd/",
        "usr/lib/systemd/system/",
        "usr/lib/systemd/system/nodemanager.service",
    }
    assert entries["etc/nodemanager/"] == "drwx------"  # the kubeconfig's directory
    assert entries["usr/bin/nodemanager"] == "-rwxr-xr-x"
    info = run("bsdtar", "-xOf", package, ".PKGINFO").stdout
    assert f"pkgver = {forms(version).pacman()}-1\n" in info
    assert "depend = python>=3.11\n" in info and "depend = python<3.14\n" in info
    assert "provides = nodemanager\n" in info and "conflict = nodemanager\n" in info
    assert "license = Apache-2.0 AND " in info and " GPL-3.0-or-later" in info  # what it bundles
    unit = run("bsdtar", "-xOf", package, "usr/lib/systemd/system/nodemanager.service").stdout
    assert SERVICE_LINE in unit
    packaged = run("bsdtar", "-xOf", package, "usr/bin/nodemanager", text=False).stdout
    assert packaged == (dist / agent).read_bytes()


def test_apkbuild_sourced_verified_and_packaged(dist, tmp_path):
    """What abuild does with the APKBUILD, short of apk: source it, check the checksums, run
    package() into $pkgdir; and aports' rules: the checksums block last (where `abuild
    checksum` rewrites it), the service files in the -openrc subpackage."""
    version = release_version(dist)
    srcdir, pkgdir = tmp_path / "src", tmp_path / "pkg"
    srcdir.mkdir()
    run("sh", "-n", dist / "APKBUILD")
    sources = [
        f"nodemanager-{version}-linux-musl-{OTHER}",
        "nodemanager.initd",
        "nodemanager.confd",
    ]
    for name in sources:  # abuild links each local source into $srcdir
        (srcdir / name).symlink_to(dist / name)
    script = (
        '. "$1/APKBUILD"; set -e\n'
        'printf "%s\\n" "$pkgver" "$arch" "$subpackages" "$license" $source\n'
        'printf "%s\\n" "$sha512sums" > "$srcdir/checksums"\n'
        'cd "$srcdir" && sha512sum -c checksums >&2\n'
        "package\n"
    )
    env = {"PATH": "/usr/bin:/bin", "CARCH": OTHER, "srcdir": str(srcdir), "pkgdir": str(pkgdir)}
    out = run("sh", "-c", script, "apkbuild", dist, env=env).stdout.splitlines()
    pkgver, arch, subpackages, license_, *source = out
    assert pkgver == forms(version).apk()  # apk's grammar: no '+' (versionscheme.py)
    assert arch.split() == [OTHER]
    assert subpackages == "nodemanager-openrc"
    assert license_.startswith("Apache-2.0 AND ") and "GPL-3.0-or-later" in license_
    assert source == sources
    text = (dist / "APKBUILD").read_text()
    # `abuild checksum` deletes from `sha512sums="` to the closing quote and appends anew
    assert re.search(r'\nsha512sums="\n([0-9a-f]{128}  [^\n]+\n)+"\n$', text), text[-600:]
    tree = {str(p.relative_to(pkgdir)): stat.filemode(p.stat().st_mode) for p in pkgdir.rglob("*")}
    assert tree == {
        "etc": "drwxr-xr-x",
        "etc/conf.d": "drwxr-xr-x",
        "etc/conf.d/nodemanager": "-rw-r--r--",
        "etc/init.d": "drwxr-xr-x",
        "etc/init.d/nodemanager": "-rwxr-xr-x",
        "etc/nodemanager": "drwx------",
        "usr": "drwxr-xr-x",
        "usr/bin": "drwxr-xr-x",
        "usr/bin/nodemanager": "-rwxr-xr-x",
    }
    initd = (pkgdir / "etc/init.d/nodemanager").read_text()
    assert initd.startswith("#!/sbin/openrc-run\n")  # abuild refuses an .initd without it
    assert 'command="/usr/bin/nodemanager"' in initd
    agent = dist / f"nodemanager-{version}-linux-musl-{OTHER}"
    assert (pkgdir / "usr/bin/nodemanager").read_bytes() == agent.read_bytes()


def test_source_pkgbuild_depends_on_archs_python_packages(dist, user_dir):
    """PKGBUILD.source: makepkg's own checks (--printsrcinfo runs its lint; --verifysource its
    checksums) as a user, and a dependency of Arch's for each of pyproject.toml's."""
    assert shutil.which("makepkg"), "makepkg missing: `make deps` installs Debian's makepkg"
    version = release_version(dist)
    for name in ("PKGBUILD.source", "nodemanager.service", f"nodemanager-{version}.tar.gz"):
        shutil.copy2(dist / name, user_dir / name)
        shutil.chown(user_dir / name, "nobody")
    env = ["env", "-i", "PATH=/usr/bin:/bin", f"HOME={user_dir}"]
    as_user = ["runuser", "-u", "nobody", "--", *env, "makepkg", "-p", "PKGBUILD.source"]
    info = run(*as_user, "--printsrcinfo", cwd=user_dir).stdout
    run(*as_user, "--verifysource", "--nodeps", cwd=user_dir)
    assert f"pkgver = {forms(version).pacman()}\n" in info and "arch = any\n" in info
    depends = set(re.findall(r"^\tdepends = (.+)$", info, re.M))
    assert {recipes.ARCH_NAMES[name] for name in port_dependencies()} <= depends
    assert "ansible" in depends  # the community collections
    assert f"source = nodemanager-{version}.tar.gz\n" in info


def port_dependencies() -> dict[str, str]:
    """pyproject.toml's dependencies as a port writes them: name -> `>=a<b`."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    found = {}
    for dep in deps:
        name, bounds = re.fullmatch(r"([A-Za-z0-9_.-]+)(.*)", dep).groups()
        found[name.lower()] = bounds.replace(",", "")
    return found


def test_freebsd_port_parses_and_names_the_release(dist, tmp_path):
    assert shutil.which("bmake"), "bmake missing: `make deps` installs it"
    version = release_version(dist)
    sdist = dist / f"nodemanager-{version}.tar.gz"
    with tarfile.open(dist / f"nodemanager-{version}-freebsd-port.tar.gz") as tar:
        names = sorted(tar.getnames())
        tar.extractall(tmp_path / "ports", filter="data")
    port = tmp_path / "ports" / "sysutils" / "nodemanager"
    assert names == [
        f"sysutils/nodemanager/{name}"
        for name in ("Makefile", "distinfo", "files/nodemanager.in", "pkg-descr", "pkg-plist")
    ]
    mk = tmp_path / "mk"
    mk.mkdir()
    for name in ("sys.mk", "bsd.port.mk"):  # make's own rules and the ports framework
        (mk / name).write_text("# not here\n")
    names_values = ("PORTNAME", "PORTVERSION", "DISTNAME", "USE_RC_SUBR", "USE_PYTHON")
    names_values += ("RUN_DEPENDS",)
    query = [f"-V{name}" for name in names_values]
    values = run("bmake", "-m", mk, *query, cwd=port).stdout.splitlines()
    got = dict(zip(names_values, values, strict=True))
    assert got["PORTNAME"] == "nodemanager" and got["PORTVERSION"] == forms(version).freebsd()
    assert got["DISTNAME"] == sdist.name.removesuffix(".tar.gz")
    assert got["USE_RC_SUBR"] == "nodemanager" and "pep517" in got["USE_PYTHON"].split()
    declared = {}
    for dep in got["RUN_DEPENDS"].split():
        spec = dep.split(":")[0].removeprefix("${PYTHON_PKGNAMEPREFIX}")
        name, bounds = re.fullmatch(r"([A-Za-z0-9_.-]+?)([<>=].*)", spec).groups()
        declared[name.lower()] = bounds
    assert declared.pop("ansible") == ">0"  # the collections the wheel does not carry
    assert declared == port_dependencies()
    install = run("bmake", "-m", mk, "-n", "post-install", "MKDIR=mkdir -p", "STAGEDIR=/stage",
                  "PREFIX=/usr/local", cwd=port).stdout  # fmt: skip
    assert install.strip() == "mkdir -p /stage/usr/local/etc/nodemanager"
    assert (port / "pkg-plist").read_text() == "@dir(root,wheel,0700) etc/nodemanager\n"
    # distinfo names the sdist this release built, with its checksum and size
    distinfo = (port / "distinfo").read_text()
    assert f"SIZE ({sdist.name}) = {sdist.stat().st_size}\n" in distinfo
    assert f"SHA256 ({sdist.name}) = {hashlib.sha256(sdist.read_bytes()).hexdigest()}\n" in distinfo
    rc = (port / "files" / "nodemanager.in").read_text()
    run("sh", "-n", port / "files" / "nodemanager.in")
    assert "%%PREFIX%%/bin/nodemanager" in rc and "/usr/local" not in rc
    assert 'procname="/usr/sbin/daemon"' in rc  # rc.subr finds daemon(8): test_rc_subr_contract
