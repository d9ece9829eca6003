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
- `sbom.cdx.json`: CycloneDX 1.5, one component per artifact with the SPDX expression of what
  it holds, each listing the Python packages and Ansible collections it carries (name, version,
  purl, license), read from the artifact itself (a .deb's from the agent file inside it), not
  from the build's inputs; the image's lists its agent file's and the Debian packages of its
  root.
- The maintainer and home page of every package come from deploy/publisher.toml (or
  NODEMANAGER_MAINTAINER / NODEMANAGER_URL); a release refuses to build without them.
- `SHA256SUMS`: `sha256sum -c` format over every other file.

Usage: python deploy/release.py [DIST [ARCH-LIBC ...]]  (default: every target)
"""

from __future__ import annotations

import hashlib
import json
import os
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
import licenses  # deploy/licenses.py
import publisher as publishers  # deploy/publisher.py
import recipes  # deploy/recipes.py

ROOT = agent_build.ROOT
# Set by the test suite (tests/artifacts.py): example.org maintainers pass; a real release's not.
TEST_PUBLISHER = "NODEMANAGER_TEST_RELEASE"
TAG = re.compile(r"\.cpython-3\d+-([a-z0-9_]+)-linux-([a-z]+)\.so$")
ELF_MACHINE = {62: "x86_64", 183: "aarch64"}  # e_machine of the ELF header


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


def contents(artifact: Path) -> list[licenses.Component]:
    """The Python packages and Ansible collections an artifact carries, read from it: a zip
    (the agent files, the wheel), a tar (the sdist) or a .deb (the agent file inside it)."""
    if artifact.suffix == ".deb":
        with tempfile.TemporaryDirectory(prefix="nodemanager-sbom-") as tmp:
            subprocess.run(["dpkg-deb", "-x", str(artifact), tmp], check=True)
            return licenses.components(
                licenses.Files.of_zip(Path(tmp) / "usr" / "bin" / "nodemanager")
            )
    if artifact.name.endswith(".tar.gz"):
        return licenses.components(licenses.Files.of_tar(artifact))
    return licenses.components(licenses.Files.of_zip(artifact))


def _library(owner: str, c: licenses.Component) -> dict[str, object]:
    return {
        "type": "library",
        "bom-ref": f"{owner}/{c.name}",
        "name": c.name,
        "version": c.version,
        "purl": c.purl,
        "licenses": [{"expression": c.license}],
        "properties": [{"name": "nodemanager:kind", "value": c.kind}],
    }


def _debian(owner: str, name: str, version: str) -> dict[str, object]:
    purl = f"pkg:deb/debian/{name}@{version}?distro=debian-12"
    return {"type": "library", "bom-ref": f"{owner}/{name}", "name": name, "version": version,
            "purl": purl, "properties": [{"name": "nodemanager:kind", "value": "deb"}]}  # fmt: skip


def sbom(
    artifacts: list[Path],
    version: str,
    debian: dict[Path, list[tuple[str, str]]] | None = None,
    carried: dict[Path, Path] | None = None,
) -> dict[str, object]:
    """CycloneDX 1.5: one component per artifact, with the SPDX expression of the whole and a
    library for each Python package and Ansible collection it carries (with its license), read
    from the artifact. ``carried``: an artifact whose contents are another's (the image holds
    its agent file, unpacked); ``debian``: the Debian packages of an artifact's root."""

    def component(artifact: Path) -> dict[str, object]:
        parts = contents((carried or {}).get(artifact, artifact))
        libraries = [_library(artifact.name, c) for c in parts]
        libraries += [_debian(artifact.name, *d) for d in (debian or {}).get(artifact, [])]
        return {
            "type": "application",
            "bom-ref": artifact.name,
            "name": artifact.name,
            "version": version,
            "hashes": [{"alg": "SHA-256", "content": sha256(artifact)}],
            "licenses": [{"expression": licenses.expression(parts)}],
            "components": libraries,
        }

    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "version": 1,
        "metadata": {
            "component": {
                "type": "application",
                "name": "nodemanager",
                "version": version,
                "licenses": [{"expression": licenses.OWN}],
            }
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
    publisher = publishers.load(allow_placeholders=bool(os.environ.get(TEST_PUBLISHER)))
    sdist = backend_build("sdist", dist)
    artifacts = [sdist, backend_build("wheel", dist)]
    agents = {}
    debian: dict[Path, list[tuple[str, str]]] = {}
    carried: dict[Path, Path] = {}
    for arch, libc in targets:
        agent = agents[arch, libc] = dist / agent_name(info.version, arch, libc)
        agent_build.build(agent, arch, libc)
        if foreign := foreign_extensions(agent, arch, libc):
            raise SystemExit(f"{agent.name} carries modules of another platform: {foreign[:5]}")
        artifacts.append(agent)
        if libc == "gnu":
            package = deb.build_deb(agent, dist, info.version, arch, publisher, info.date)
            artifacts.append(package)
        if (arch, libc) == (agent_build.HOST[0], "gnu"):
            oci, debs = image.build(agent, dist, info.version)
            artifacts.append(oci)
            carried[oci], debian[oci] = agent, debs
    bom = dist / "sbom.cdx.json"
    bom.write_text(json.dumps(sbom(artifacts, info.version, debian, carried), indent=2) + "\n")
    written = recipes.write(dist, info, sdist, agents, publisher)
    sums = [f"{sha256(p)}  {p.name}" for p in [*artifacts, bom, *written]]
    (dist / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    return [*artifacts, bom, *written, dist / "SHA256SUMS"]


if __name__ == "__main__":
    targets = tuple(tuple(t.split("-", 1)) for t in sys.argv[2:]) or agent_build.TARGETS
    dist = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"
    for path in release(dist, targets):  # type: ignore[arg-type]
        print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
