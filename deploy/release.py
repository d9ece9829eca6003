"""`make release`: dist/ with the sdist, the wheel, the agent file, SHA256SUMS and an SBOM.

- `nodemanager-<version>.tar.gz` and the wheel: setuptools' PEP 517 hooks, the backend fetched
  with pip into a temporary directory (the venv's setuptools is older than pyproject asks).
- `nodemanager-<version>-linux[-musl]-<arch>`: the agent file (deploy/build.py) for each
  platform in build.TARGETS (x86_64 and aarch64, glibc and musl), every CPython minor in
  build.PYTHONS. Checked after the build: every compiled module's ELF machine and platform tag
  name the file's architecture and libc.
- `nodemanager_<version>_<amd64|arm64>.deb` (deploy/deb.py) from each glibc agent file.
- `nodemanager-controller-<version>-<arch>.oci.tar` (deploy/image.py): the controller image,
  from this machine's glibc agent file when it is among the targets (its Python root is this
  architecture's Debian packages).
- `PKGBUILD`, `APKBUILD` (with the service files they install) and the FreeBSD port
  (deploy/recipes.py), filled in with this release's versions and checksums.
- `sbom.cdx.json`: CycloneDX 1.5, one component per artifact, each listing the Python packages
  it carries (name, version, purl), read from the artifact itself, not from the build's inputs;
  the image's lists its agent file's and the Debian packages of its root.
- `SHA256SUMS`: `sha256sum -c` format over every other file.

Usage: python deploy/release.py [DIST [ARCH-LIBC ...]]  (default: every target)
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from nodemanager.version import release_info

import build as agent_build  # deploy/build.py (this directory is on sys.path when run)
import deb  # deploy/deb.py
import image  # deploy/image.py
import recipes  # deploy/recipes.py

ROOT = agent_build.ROOT
DIST_INFO = re.compile(r"(?:^|/)([^/]+)-([^/-]+)\.dist-info/METADATA$")
TAG = re.compile(r"\.cpython-3\d+-([a-z0-9_]+)-linux-([a-z]+)\.so$")
ELF_MACHINE = {62: "x86_64", 183: "aarch64"}  # e_machine of the ELF header


def python_packages(archive: Path) -> list[tuple[str, str]]:
    """(name, version) of every distribution whose METADATA the zip or wheel holds, each once."""
    with zipfile.ZipFile(archive) as zf:
        found = {m.groups() for name in zf.namelist() if (m := DIST_INFO.search(name))}
    return sorted(found)


def foreign_extensions(archive: Path, arch: str, libc: str = "gnu") -> list[str]:
    """Compiled modules in archive that are not for `arch` (an empty list is a pass): by the
    platform tag in the name where there is one, and by the ELF header's machine always (abi3
    modules carry no tag)."""
    foreign = []
    with zipfile.ZipFile(archive) as zf:
        for name in (n for n in zf.namelist() if re.search(r"\.so(\.\d+)*$", n)):
            header = zf.open(name).read(20)
            machine = ELF_MACHINE.get(int.from_bytes(header[18:20], "little"), "?")
            tag = TAG.search(name)
            if (
                header[:4] != b"\x7fELF"
                or machine != arch
                or (tag and tag.groups() != (arch, libc))
            ):
                foreign.append(name)
    return foreign


def backend_build(kind: str, dist: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="nodemanager-backend-") as backend:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", backend]
            + ["setuptools>=77"],
            check=True,
        )
        code = f"import setuptools.build_meta as b; print(b.build_{kind}({str(dist)!r}))"
        name = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={"PYTHONPATH": backend, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()[-1]
    return dist / name


def pypi(packages: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(name, version, purl) of Python distributions."""
    return [(n, v, f"pkg:pypi/{n.lower().replace('_', '-')}@{v}") for n, v in packages]


def sbom(
    artifacts: list[Path],
    version: str,
    contents: dict[Path, list[tuple[str, str, str]]] | None = None,
) -> dict[str, object]:
    """``contents``: (name, version, purl) an artifact holds where it is no zip to read them
    from (the image); the zips' Python packages are read from them."""

    def component(artifact: Path) -> dict[str, object]:
        zipped = artifact.suffix not in (".gz", ".deb", ".tar")
        packages = pypi(python_packages(artifact)) if zipped else []
        return {
            "type": "application",
            "bom-ref": artifact.name,
            "name": artifact.name,
            "version": version,
            "hashes": [{"alg": "SHA-256", "content": sha256(artifact)}],
            "components": [
                {
                    "type": "library",
                    "bom-ref": f"{artifact.name}/{name}",
                    "name": name,
                    "version": pkg_version,
                    "purl": purl,
                }
                for name, pkg_version, purl in packages + (contents or {}).get(artifact, [])
            ],
        }

    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "component": {"type": "application", "name": "nodemanager", "version": version}
        },
        "components": [component(a) for a in artifacts],
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def agent_name(version: str, arch: str, libc: str) -> str:
    return (
        f"nodemanager-{version}-linux-{arch}"
        if libc == "gnu"
        else (f"nodemanager-{version}-linux-musl-{arch}")
    )


def release(dist: Path, targets: tuple[tuple[str, str], ...] = agent_build.TARGETS) -> list[Path]:
    dist.mkdir(parents=True, exist_ok=True)
    info = release_info(ROOT)
    sdist = backend_build("sdist", dist)
    artifacts = [sdist, backend_build("wheel", dist)]
    agents = {}
    contents: dict[Path, list[tuple[str, str, str]]] = {}
    for arch, libc in targets:
        agent = agents[arch, libc] = dist / agent_name(info.version, arch, libc)
        agent_build.build(agent, arch, libc)
        if foreign := foreign_extensions(agent, arch, libc):
            raise SystemExit(f"{agent.name} carries modules of another platform: {foreign[:5]}")
        artifacts.append(agent)
        if libc == "gnu":
            artifacts.append(deb.build_deb(agent, dist, info.version, arch))
        if (arch, libc) == (agent_build.HOST[0], "gnu"):
            oci, debs = image.build(agent, dist, info.version)
            artifacts.append(oci)
            contents[oci] = pypi(python_packages(agent)) + [
                (name, pkg_version, f"pkg:deb/debian/{name}@{pkg_version}?distro=debian-12")
                for name, pkg_version in debs
            ]
    bom = dist / "sbom.cdx.json"
    bom.write_text(json.dumps(sbom(artifacts, info.version, contents), indent=2) + "\n")
    written = recipes.write(dist, info, sdist, agents)
    sums = [f"{sha256(p)}  {p.name}" for p in [*artifacts, bom, *written]]
    (dist / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return [*artifacts, bom, *written, dist / "SHA256SUMS"]


if __name__ == "__main__":
    targets = tuple(tuple(t.split("-", 1)) for t in sys.argv[2:]) or agent_build.TARGETS
    dist = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"
    for path in release(dist, targets):  # type: ignore[arg-type]
        print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
