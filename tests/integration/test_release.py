"""`make release` (deploy/release.py): dist/ holds the sdist, the wheel, the agent file, an SBOM
naming every Python package and Ansible collection each artifact carries (with licenses; checked
against each artifact's own files here), LICENSE and the third-party notices in every artifact,
and SHA256SUMS that `sha256sum -c` accepts."""

import json
import os
import re
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


def _zip_contents(names: list[str]) -> set[tuple[str, str]]:
    """(kind, name) of what a zip's listing holds, read here from the file names alone (not
    through deploy/licenses.py, which the SBOM is made with)."""
    found = set()
    for name in names:
        if m := re.search(r"(?:^|/)([^/]+)-[^/-]+\.dist-info/METADATA$", name):
            found.add(("pypi", m[1].lower().replace("_", "-")))
        elif m := re.search(
            r"ansible_collections/([^/]+)/([^/]+)/(MANIFEST\.json|galaxy\.yml)$", name
        ):
            found.add(("ansible-collection", f"{m[1]}.{m[2]}"))
    return found


def _listed(component: dict) -> set[tuple[str, str]]:
    kinds = {c["bom-ref"]: c["properties"][0]["value"] for c in component["components"]}
    return {
        (kinds[c["bom-ref"]], c["name"].lower().replace("_", "-"))
        for c in component["components"]
        if kinds[c["bom-ref"]] != "deb"
    }


def _image_root(archive: Path, into: Path) -> Path:
    """The image's root file system, unpacked by umoci (as a runtime would have it)."""
    layout, bundle = into / "layout", into / "bundle"
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="data")
    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    ref = entry["annotations"]["org.opencontainers.image.ref.name"]
    rootless = ["--rootless"] if os.geteuid() != 0 else []
    subprocess.run(
        ["umoci", "unpack", *rootless, "--image", f"{layout}:{ref}", str(bundle)],
        check=True,
        capture_output=True,
    )
    return bundle / "rootfs"


def test_sbom_lists_the_packages_and_collections_inside_each_artifact(dist, tmp_path):
    bom = json.loads((dist / "sbom.cdx.json").read_text())
    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == "1.5"
    by_name = {c["name"]: c for c in bom["components"]}
    for name, component in by_name.items():
        for library in component["components"]:
            if library["properties"][0]["value"] != "deb":
                (expression,) = (entry["expression"] for entry in library["licenses"])
                assert re.fullmatch(r"[A-Za-z0-9.+-]+( (AND|OR) [A-Za-z0-9.+-]+)*", expression)
        assert component["licenses"][0]["expression"], name
    agent = next(n for n in by_name if n.endswith(f"-linux-{ARCH}"))
    for name in by_name:  # every zip: the agent files and the wheel
        if name.endswith((".whl", f"-linux-{ARCH}", f"-linux-musl-{OTHER}")):
            with zipfile.ZipFile(dist / name) as zf:
                assert _listed(by_name[name]) == _zip_contents(zf.namelist()), name
    carried = _listed(by_name[agent])
    assert {("pypi", "ansible-core"), ("pypi", "kubernetes"), ("pypi", "pyyaml")} <= carried
    assert {("ansible-collection", "community.general")} <= carried
    assert {("ansible-collection", "nodemanager.core")} <= carried
    licenses = {c["name"]: c["licenses"][0]["expression"] for c in by_name[agent]["components"]}
    assert licenses["ansible-core"] == "GPL-3.0-or-later"
    assert licenses["community.general"].startswith("BSD-2-Clause AND GPL-3.0-or-later")
    whole = by_name[agent]["licenses"][0]["expression"]
    assert "Apache-2.0" in whole.split(" AND ") and "GPL-3.0-or-later" in whole.split(" AND ")
    wheel = next(n for n in by_name if n.endswith(".whl"))
    assert _listed(by_name[wheel]) == {
        ("pypi", "nodemanager"),
        ("ansible-collection", "nodemanager.core"),
    }
    # each .deb: the agent file inside it, read back out with dpkg-deb
    debs = [n for n in by_name if n.endswith(".deb")]
    assert debs
    for name in debs:
        subprocess.run(["dpkg-deb", "-x", str(dist / name), str(tmp_path / name)], check=True)
        with zipfile.ZipFile(tmp_path / name / "usr" / "bin" / "nodemanager") as zf:
            assert _listed(by_name[name]) == _zip_contents(zf.namelist()) == carried, name
    # the image: its agent file's, and the Debian packages of its root
    image = next(n for n in by_name if n.endswith(".oci.tar"))
    assert _listed(by_name[image]) == carried
    debian = {c["name"] for c in by_name[image]["components"] if c["purl"].startswith("pkg:deb/")}
    assert {"python3.11-minimal", "libc6", "libssl3"} <= debian


def test_every_artifact_carries_the_license_and_the_third_party_notices(dist, tmp_path):
    license_text = (ROOT / "LICENSE").read_text()
    for agent in [*dist.glob("nodemanager-*-linux-*")]:
        with zipfile.ZipFile(agent) as zf:
            assert zf.read("LICENSE").decode() == license_text
            notices = zf.read("THIRD-PARTY-NOTICES").decode()
        assert "community.general 11." in notices and "GNU GENERAL PUBLIC LICENSE" in notices
        assert "ansible-core" in notices and "Version 3, 29 June 2007" in notices
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zf.namelist())
    (sdist,) = [p for p in dist.glob("nodemanager-*.tar.gz") if "-freebsd-port" not in p.name]
    with tarfile.open(sdist) as tar:
        assert any(n.endswith("/LICENSE") for n in tar.getnames())
    for deb in dist.glob("*.deb"):
        listing = subprocess.run(
            ["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True
        ).stdout
        for doc in ("copyright", "changelog.gz", "THIRD-PARTY-NOTICES.gz"):
            assert f"./usr/share/doc/nodemanager/{doc}\n" in listing, (deb.name, doc)
    (image,) = dist.glob("*.oci.tar")
    root = _image_root(image, tmp_path)
    doc = root / "usr" / "local" / "share" / "doc" / "nodemanager"
    assert (doc / "LICENSE").read_text() == license_text
    assert (doc / "THIRD-PARTY-NOTICES").read_text() == notices
    assert (root / "usr" / "share" / "doc" / "libc6" / "copyright").is_file()  # Debian's stay
    assert not (root / "usr" / "share" / "doc" / "libc6" / "changelog.Debian.gz").exists()


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
