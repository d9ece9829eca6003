"""The Debian package (deploy/deb.py): dpkg installs it into the Debian root the machine tests
cache (a copy-on-write overlay, so the cache stays clean), the installed agent runs with that
root's own python3, and purge leaves no file of it behind."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import artifacts
from tests.integration.machines import cached_root

pytestmark = [pytest.mark.ansible, pytest.mark.machine]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))
import deb  # noqa: E402  (deploy/deb.py)


@pytest.fixture
def debian(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("dpkg --root and overlay mounts need root")
    lower = cached_root("systemd")
    upper, work, merged = (tmp_path / name for name in ("upper", "work", "merged"))
    for d in (upper, work, merged):
        d.mkdir()
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(merged)], check=True)
    try:
        yield lower, upper, merged
    finally:
        subprocess.run(["umount", str(merged)], check=True)


def test_lintian_reports_no_error_on_the_deb():
    """Debian's own linter over the release's package: errors are what Debian would reject
    (no copyright file, a changelog that does not match the version, bad control fields)."""
    if shutil.which("lintian") is None:
        pytest.skip("lintian missing: `make deps` installs it")
    package = next(artifacts.release().glob(f"nodemanager_*_{deb.DEB_ARCH[artifacts.ARCH]}.deb"))
    done = subprocess.run(
        ["lintian", "--tag-display-limit", "0", str(package)], capture_output=True, text=True
    )
    errors = [line for line in done.stdout.splitlines() if line.startswith("E:")]
    assert errors == [], done.stdout
    assert done.returncode == 0, done.stdout + done.stderr


def test_deb_installs_runs_and_purges_clean(debian):
    lower, upper, merged = debian
    # `make release`'s package, from the release the tests share (tests/artifacts.py)
    package = next(artifacts.release().glob(f"nodemanager_*_{deb.DEB_ARCH[artifacts.ARCH]}.deb"))
    listed = subprocess.run(
        ["dpkg-deb", "-c", str(package)], capture_output=True, text=True, check=True
    ).stdout
    for path in ("./usr/bin/nodemanager", "./lib/systemd/system/nodemanager.service"):
        assert path in listed
    depends = subprocess.run(
        ["dpkg-deb", "-f", str(package), "Depends"], capture_output=True, text=True, check=True
    ).stdout
    assert "python3-apt" in depends

    dpkg = ["dpkg", f"--root={merged}"]
    installed = subprocess.run([*dpkg, "-i", str(package)], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    unit = (merged / "lib/systemd/system/nodemanager.service").read_text()
    assert "ExecStart=/usr/bin/nodemanager " in unit
    # Every program the unit runs is in the root the package installed into (with its
    # Depends): `systemctl reload` once ran /bin/kill, which is procps's and not there.
    programs = [
        line.split("=", 1)[1].lstrip("-@:+!").split()[0]
        for line in unit.splitlines()
        if line.startswith(("ExecStart=", "ExecReload=", "ExecStop=", "ExecStartPre="))
    ]
    assert "/bin/sh" in programs, programs
    absent = [p for p in programs if not os.path.lexists(merged / p.lstrip("/"))]
    assert absent == [], f"the unit runs programs the root lacks: {absent}"
    version = subprocess.run(
        ["chroot", str(merged), "/usr/bin/nodemanager", "--version"],
        capture_output=True,
        text=True,
    )
    assert version.returncode == 0 and version.stdout.startswith("nodemanager "), version.stderr
    assert (merged / "var/cache/nodemanager").is_dir()  # unpacked as root, purge removes it

    purged = subprocess.run([*dpkg, "--purge", "nodemanager"], capture_output=True, text=True)
    assert purged.returncode == 0, purged.stdout + purged.stderr
    # What is left in the overlay's upper layer beyond dpkg's own records must be the root's
    # own directories (copied up): nothing of the package.
    left = [
        rel
        for rel in (p.relative_to(upper) for p in upper.rglob("*"))
        if not str(rel).startswith(("var/lib/dpkg", "var/log")) and not (lower / rel).is_dir()
    ]
    assert left == []
