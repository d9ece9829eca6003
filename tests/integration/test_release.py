"""`make release` (deploy/release.py): dist/ holds the sdist, the wheel, the agent file, an SBOM
naming every Python package each artifact carries, and SHA256SUMS that `sha256sum -c` accepts."""

import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

# the release (with the controller image) is built in the first test that asks, after any
# other checkout's build (one lock): 600 s is too short on a loaded machine
pytestmark = [pytest.mark.ansible, pytest.mark.timeout(1800)]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))
from tests import artifacts  # noqa: E402
from tests.artifacts import ARCH, OTHER  # noqa: E402

import release  # noqa: E402  (deploy/release.py)


@pytest.fixture(scope="module")
def dist() -> Path:
    # this machine's target and one cross-built (musl, the other architecture); `make release`
    # builds all four the same way. One build per source hash, shared (tests/artifacts.py).
    return artifacts.release()


def test_checksums_cover_every_artifact_and_verify(dist):
    sums = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True
    )
    assert sums.returncode == 0, sums.stdout + sums.stderr
    listed = {line.split("  ", 1)[1] for line in (dist / "SHA256SUMS").read_text().splitlines()}
    assert listed == {p.name for p in dist.iterdir()} - {"SHA256SUMS"}
    assert any(name.endswith(".tar.gz") for name in listed)
    assert any(name.endswith("-py3-none-any.whl") for name in listed)
    assert any(name.endswith(f"-linux-{ARCH}") for name in listed)
    assert any(name.endswith(f"-linux-musl-{OTHER}") for name in listed)
    assert any(name.startswith("nodemanager_") and name.endswith(".deb") for name in listed)
    assert any(name.startswith("nodemanager-controller-") for name in listed)


def test_sbom_lists_the_packages_inside_each_artifact(dist):
    bom = json.loads((dist / "sbom.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.5"
    carried = {c["name"]: {p["name"].lower() for p in c["components"]} for c in bom["components"]}
    agent = next(name for name in carried if name.endswith(f"-linux-{ARCH}"))
    # read from the file: the pure ones once, PyYAML carried per CPython minor (one entry)
    assert {"nodemanager", "ansible_core", "kubernetes", "pyyaml", "markupsafe"} <= carried[agent]
    assert {"cryptography", "cffi"} <= carried[agent]  # bootstrap --certificate's
    assert carried[agent] == {name.lower() for name, _ in release.python_packages(dist / agent)}
    wheel = next(name for name in carried if name.endswith(".whl"))
    assert carried[wheel] == {"nodemanager"}
    # the image: its agent file's packages and the Debian packages of its root
    image = next(name for name in carried if name.endswith(".oci.tar"))
    assert carried[agent] | {"python3.11-minimal", "libc6", "libssl3"} <= carried[image]


def test_agent_files_carry_only_modules_of_their_platform(dist):
    native = next(dist.glob(f"*-linux-{ARCH}"))
    cross = next(dist.glob(f"*-linux-musl-{OTHER}"))
    assert release.foreign_extensions(native, ARCH, "gnu") == []
    assert release.foreign_extensions(cross, OTHER, "musl") == []
    # the check sees what it looks for: each file fails as the other platform
    assert release.foreign_extensions(native, OTHER, "gnu")
    assert release.foreign_extensions(cross, OTHER, "gnu")
    with zipfile.ZipFile(cross) as zf:
        assert any(n.endswith(f"cpython-313-{OTHER}-linux-musl.so") for n in zf.namelist())
    # cryptography's abi3 module has no platform tag in its name, carried once for every minor:
    # accepted by its ELF machine, and refused by it in the other architecture's file.
    abi3 = "payload/site/cryptography/hazmat/bindings/_rust.abi3.so"
    for agent in (native, cross):
        with zipfile.ZipFile(agent) as zf:
            assert abi3 in zf.namelist()
    assert abi3 in release.foreign_extensions(cross, ARCH, "musl")


def test_cross_built_file_refuses_this_machine_in_one_line(dist, tmp_path):
    cross = next(dist.glob(f"*-linux-musl-{OTHER}"))
    result = subprocess.run(
        [sys.executable, "-I", "-S", str(cross), "--version"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"nodemanager: this file is for {OTHER}-linux-musl; this Python is "
        f"{sys.implementation._multiarch}: use that platform's file"
    ]


def test_wheel_sdist_and_agent_file_carry_one_git_stamped_version(dist):
    agent = next(dist.glob(f"nodemanager-*-linux-{ARCH}"))
    version = agent.name.removeprefix("nodemanager-").removesuffix(f"-linux-{ARCH}")
    assert "+g" in version or "+" not in version  # a tag, or the commit as local version
    with zipfile.ZipFile(dist / f"nodemanager-{version}-py3-none-any.whl") as zf:
        metadata = zf.read(f"nodemanager-{version}.dist-info/METADATA").decode()
        wheel_stamp = json.loads(zf.read("nodemanager/_build.json"))
    assert f"\nVersion: {version}\n" in metadata
    with tarfile.open(dist / f"nodemanager-{version}.tar.gz") as tar:
        pkg_info = tar.extractfile(f"nodemanager-{version}/PKG-INFO").read().decode()
        sdist_stamp = json.loads(
            tar.extractfile(f"nodemanager-{version}/nodemanager/_build.json").read()
        )
    assert f"\nVersion: {version}\n" in pkg_info
    with zipfile.ZipFile(agent) as zf:
        agent_stamp = json.loads(zf.read("payload/site/nodemanager/_build.json"))
    assert wheel_stamp == sdist_stamp == agent_stamp
    assert wheel_stamp["version"] == version and len(wheel_stamp["commit"]) == 40
