"""The distribution recipes of a release, written into dist/ beside the files they package.

deploy/packaging/ keeps each recipe as a working file; what a release decides (its version in
each distribution's grammar, the architectures built, the checksums) is set here by replacing the
named assignments with values quoted as the shell or make reads them, never by pasting text:

- `PKGBUILD` (Arch, nodemanager-bin) with `nodemanager.service`: from the glibc agent files;
  `makepkg` in dist/. `PKGBUILD.source` (nodemanager): from the sdist with Arch's python-*
  packages as dependencies; `makepkg -p PKGBUILD.source`.
- `APKBUILD` (Alpine) with `nodemanager.initd` (deploy/nodemanager.openrc) and
  `nodemanager.confd` in a -openrc subpackage: from the musl agent files; `abuild -r` in dist/.
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

import licenses  # deploy/licenses.py
from publisher import Publisher

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


def maintained(text: str, publisher: Publisher) -> str:
    """The recipe's `# Maintainer:` comment (exactly one) naming the publisher."""
    line = f"# Maintainer: {publisher.maintainer}"
    text, count = re.subn(r"^# Maintainer: .*$", lambda _: line, text, flags=re.M)
    if count != 1:
        raise ValueError(f"{count} '# Maintainer:' lines in the recipe, expected one")
    return text


def bundled_license(agents: dict[str, Path]) -> str:
    """The SPDX expression of what the agent files hold (the same packages on every arch)."""
    found = {
        licenses.expression(licenses.components(licenses.Files.of_zip(p))) for p in agents.values()
    }
    if len(found) != 1:
        raise SystemExit(f"the agent files bundle differently licensed contents: {found}")
    return found.pop()


def pkgbuild(
    dist: Path, info: BuildInfo, agents: dict[str, Path], publisher: Publisher
) -> list[Path]:
    service = dist / "nodemanager.service"
    shutil.copyfile(DEPLOY / "nodemanager.service", service)
    values: dict[str, str | list[str]] = {
        "pkgver": info.scheme().pacman(),
        "_release": info.version,
        "arch": sorted(agents),
        "url": publisher.url,
        "license": [bundled_license(agents)],
        "sha256sums": [digest(service)],
        "noextract": sorted(p.name for p in agents.values()),
    }
    for arch in ("x86_64", "aarch64"):
        agent = agents.get(arch)
        values[f"source_{arch}"] = [agent.name] if agent else []
        values[f"sha256sums_{arch}"] = [digest(agent)] if agent else []
    out = dist / "PKGBUILD"
    out.write_text(maintained(assign_shell((RECIPES / "PKGBUILD").read_text(), values), publisher))
    return [out, service]


CONFD = """\
# Extra flags of the nodemanager agent (--node-labels, --metrics-bind-address, ...).
#NODEMANAGER_ARGS=""
"""


# pyproject.toml's dependencies by Arch's package names (extra); `ansible` adds the community
# collections the sdist does not carry.
ARCH_NAMES = {
    "ansible-core": "ansible-core",
    "ansible-runner": "python-ansible-runner",
    "kubernetes": "python-kubernetes",
    "click": "python-click",
    "pyyaml": "python-yaml",
    "prometheus-client": "python-prometheus_client",
    "jinja2": "python-jinja",
    "cryptography": "python-cryptography",
}


def pkgbuild_source(dist: Path, info: BuildInfo, sdist: Path, publisher: Publisher) -> list[Path]:
    """The source package: the sdist built with Arch's own python-* packages."""
    service = dist / "nodemanager.service"
    depends = ["python>=3.11", *ARCH_NAMES.values(), "ansible"]
    values: dict[str, str | list[str]] = {
        "pkgver": info.scheme().pacman(),
        "_release": info.version,
        "url": publisher.url,
        "depends": depends,
        "source": [sdist.name, service.name],
        "sha256sums": [digest(sdist), digest(service)],
    }
    text = assign_shell((RECIPES / "PKGBUILD.source").read_text(), values)
    out = dist / "PKGBUILD.source"
    out.write_text(maintained(text, publisher))
    return [out]


def apkbuild(
    dist: Path, info: BuildInfo, agents: dict[str, Path], publisher: Publisher
) -> list[Path]:
    """Every agent file and the service files are sources (aports keeps one static checksum
    list: an architecture's build fetches all, installs its own), the checksums last."""
    initd, confd = dist / "nodemanager.initd", dist / "nodemanager.confd"
    service = (DEPLOY / "nodemanager.openrc").read_text()
    initd.write_text(service.replace("/usr/local/bin/nodemanager", "/usr/bin/nodemanager"))
    confd.write_text(CONFD)
    sources = [agents[arch] for arch in sorted(agents)] + [initd, confd]
    values: dict[str, str | list[str]] = {
        "pkgver": info.scheme().apk(),
        "arch": " ".join(sorted(agents)),
        "url": publisher.url,
        "license": bundled_license(agents),
        "_release": info.version,
    }
    text = assign_shell((RECIPES / "APKBUILD").read_text(), values)
    # Double-quoted blocks, as `abuild checksum` writes and rewrites them (its sed looks for
    # `sha512sums="`); the names are plain (write() checks the version), the sums hex.
    blocks = {
        "source": "".join(f"\n\t{p.name}" for p in sources),
        "sha512sums": "".join(f"\n{digest(p, 'sha512')}  {p.name}" for p in sources),
    }
    for name, block in blocks.items():
        line = f'{name}="{block}\n"'
        text, count = re.subn(rf"^{name}=.*$", lambda _, line=line: line, text, flags=re.M)
        if count != 1:
            raise ValueError(f"{name}: {count} assignments in the APKBUILD, expected one")
    out = dist / "APKBUILD"
    out.write_text(maintained(text, publisher))
    return [out, initd, confd]


def commit_time(info: BuildInfo) -> int:
    when = datetime.datetime.fromisoformat(info.date) if info.date[:4].isdigit() else None
    return int((when or datetime.datetime.now(datetime.UTC)).timestamp())


def port_files(info: BuildInfo, sdist: Path, publisher: Publisher) -> dict[str, bytes]:
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
    # An address and a URL are no plain make values: deploy/publisher.py checked them.
    for name, value in (("MAINTAINER", publisher.email), ("WWW", publisher.url)):
        line = f"{name}=\t{value}"
        makefile, count = re.subn(rf"^{name}=\t+.*$", lambda _, x=line: x, makefile, flags=re.M)
        if count != 1:
            raise ValueError(f"{name}: {count} assignments in the port Makefile, expected one")
    return {
        f"{PORT}/Makefile": makefile.encode(),
        f"{PORT}/distinfo": distinfo.encode(),
        f"{PORT}/pkg-descr": (RECIPES / "freebsd" / "pkg-descr").read_bytes(),
        f"{PORT}/pkg-plist": (RECIPES / "freebsd" / "pkg-plist").read_bytes(),
        f"{PORT}/files/nodemanager.in": rc.encode(),
    }


def freebsd_port(dist: Path, info: BuildInfo, sdist: Path, publisher: Publisher) -> Path:
    out = dist / f"nodemanager-{info.version}-freebsd-port.tar.gz"
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        for name, data in port_files(info, sdist, publisher).items():
            member = tarfile.TarInfo(name)
            member.size, member.mode, member.mtime = len(data), 0o644, commit_time(info)
            tar.addfile(member, io.BytesIO(data))
    partial.rename(out)
    return out


def write(
    dist: Path,
    info: BuildInfo,
    sdist: Path,
    agents: dict[tuple[str, str], Path],
    publisher: Publisher,
) -> list[Path]:
    """The recipes for what this release built (an Arch recipe only with a glibc agent file, an
    Alpine one only with a musl one); the paths written."""
    if not PLAIN.match(info.version):
        raise SystemExit(f"version {info.version!r}: not usable in a file name or recipe")
    glibc = {arch: p for (arch, libc), p in agents.items() if libc == "gnu"}
    musl = {arch: p for (arch, libc), p in agents.items() if libc == "musl"}
    written = pkgbuild(dist, info, glibc, publisher) if glibc else []
    written += pkgbuild_source(dist, info, sdist, publisher) if glibc else []
    written += apkbuild(dist, info, musl, publisher) if musl else []
    return [*written, freebsd_port(dist, info, sdist, publisher)]
