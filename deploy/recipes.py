"""The distribution recipes of a release, written into dist/ beside the files they package.

deploy/packaging/ keeps each recipe as a working file; what a release decides (its version in
each distribution's grammar, the architectures built, the checksums) is set here by replacing the
named assignments with values quoted as the shell or make reads them, never by pasting text:

- `PKGBUILD` (Arch) with `nodemanager.service`: from the glibc agent files; `makepkg` in dist/.
- `APKBUILD` (Alpine) with `nodemanager.initd` (deploy/nodemanager.openrc): from the musl
  agent files; `abuild -r` in dist/.
- `nodemanager-<version>-freebsd-port.tar.gz`: sysutils/nodemanager/ built from the sdist with
  FreeBSD's own Python packages, its distinfo naming the sdist, files/nodemanager.in from
  deploy/nodemanager.rc (%%PREFIX%% where it says /usr/local).
"""

from __future__ import annotations

import datetime
import hashlib
import io
import re
import shlex
import shutil
import tarfile
from pathlib import Path

from nodemanager.version import BuildInfo

DEPLOY = Path(__file__).resolve().parent
RECIPES = DEPLOY / "packaging"
PORT = "sysutils/nodemanager"
# A value make or a file name takes as it is: anything else is refused, not escaped.
PLAIN = re.compile(r"^[A-Za-z0-9._+-]*$")


def digest(path: Path, algorithm: str = "sha256") -> str:
    return hashlib.new(algorithm, path.read_bytes()).hexdigest()


def assign_shell(text: str, values: dict[str, str | list[str]]) -> str:
    """Replace each `NAME=...` line (exactly one per name) with the value, shell-quoted; a list
    becomes a bash array (PKGBUILD)."""
    for name, value in values.items():
        quoted = (
            "(" + " ".join(map(shlex.quote, value)) + ")"
            if isinstance(value, list)
            else shlex.quote(value)
        )
        line = f"{name}={quoted}"
        text, count = re.subn(rf"^{name}=.*$", lambda _, line=line: line, text, flags=re.M)
        if count != 1:
            raise ValueError(f"{name}: {count} assignments in the recipe, expected one")
    return text


def assign_make(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        if not PLAIN.match(value):
            raise ValueError(f"{name}: {value!r} is not a plain make value")
        line = f"{name}=\t{value}"
        text, count = re.subn(rf"^{name}=\t.*$", lambda _, line=line: line, text, flags=re.M)
        if count != 1:
            raise ValueError(f"{name}: {count} assignments in the port Makefile, expected one")
    return text


def pkgbuild(dist: Path, info: BuildInfo, agents: dict[str, Path]) -> list[Path]:
    service = dist / "nodemanager.service"
    shutil.copyfile(DEPLOY / "nodemanager.service", service)
    values: dict[str, str | list[str]] = {
        "pkgver": info.scheme().pacman(),
        "_release": info.version,
        "arch": sorted(agents),
        "sha256sums": [digest(service)],
        "noextract": sorted(p.name for p in agents.values()),
    }
    for arch in ("x86_64", "aarch64"):
        agent = agents.get(arch)
        values[f"source_{arch}"] = [agent.name] if agent else []
        values[f"sha256sums_{arch}"] = [digest(agent)] if agent else []
    out = dist / "PKGBUILD"
    out.write_text(assign_shell((RECIPES / "PKGBUILD").read_text(), values))
    return [out, service]


def apkbuild(dist: Path, info: BuildInfo, agents: dict[str, Path]) -> list[Path]:
    initd = dist / "nodemanager.initd"
    shutil.copyfile(DEPLOY / "nodemanager.openrc", initd)
    values: dict[str, str | list[str]] = {
        "pkgver": info.scheme().apk(),
        "arch": " ".join(sorted(agents)),
        "_release": info.version,
        "_sha512_initd": digest(initd, "sha512"),
    }
    for arch in ("x86_64", "aarch64"):
        values[f"_sha512_{arch}"] = digest(agents[arch], "sha512") if arch in agents else ""
    out = dist / "APKBUILD"
    out.write_text(assign_shell((RECIPES / "APKBUILD").read_text(), values))
    return [out, initd]


def commit_time(info: BuildInfo) -> int:
    when = datetime.datetime.fromisoformat(info.date) if info.date[:4].isdigit() else None
    return int((when or datetime.datetime.now(datetime.UTC)).timestamp())


def port_files(info: BuildInfo, sdist: Path) -> dict[str, bytes]:
    """The port directory's files by path under the ports tree."""
    distinfo = (
        f"TIMESTAMP = {commit_time(info)}\n"
        f"SHA256 ({sdist.name}) = {digest(sdist)}\n"
        f"SIZE ({sdist.name}) = {sdist.stat().st_size}\n"
    )
    rc = (DEPLOY / "nodemanager.rc").read_text().replace("/usr/local", "%%PREFIX%%")
    makefile = assign_make(
        (RECIPES / "freebsd" / "Makefile").read_text(),
        {"PORTVERSION": info.scheme().freebsd(), "DISTNAME": sdist.name.removesuffix(".tar.gz")},
    )
    return {
        f"{PORT}/Makefile": makefile.encode(),
        f"{PORT}/distinfo": distinfo.encode(),
        f"{PORT}/pkg-descr": (RECIPES / "freebsd" / "pkg-descr").read_bytes(),
        f"{PORT}/pkg-plist": (RECIPES / "freebsd" / "pkg-plist").read_bytes(),
        f"{PORT}/files/nodemanager.in": rc.encode(),
    }


def freebsd_port(dist: Path, info: BuildInfo, sdist: Path) -> Path:
    out = dist / f"nodemanager-{info.version}-freebsd-port.tar.gz"
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        for name, data in port_files(info, sdist).items():
            member = tarfile.TarInfo(name)
            member.size, member.mode, member.mtime = len(data), 0o644, commit_time(info)
            tar.addfile(member, io.BytesIO(data))
    partial.rename(out)
    return out


def write(
    dist: Path, info: BuildInfo, sdist: Path, agents: dict[tuple[str, str], Path]
) -> list[Path]:
    """The recipes for what this release built (an Arch recipe only with a glibc agent file, an
    Alpine one only with a musl one); the paths written."""
    if not PLAIN.match(info.version):
        raise SystemExit(f"version {info.version!r}: not usable in a file name or recipe")
    glibc = {arch: p for (arch, libc), p in agents.items() if libc == "gnu"}
    musl = {arch: p for (arch, libc), p in agents.items() if libc == "musl"}
    written = pkgbuild(dist, info, glibc) if glibc else []
    written += apkbuild(dist, info, musl) if musl else []
    return [*written, freebsd_port(dist, info, sdist)]
