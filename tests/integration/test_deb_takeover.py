"""The .deb over upstream nodemanager's layout (its deployment guide: the unit in
/etc/systemd/system, which shadows the packaged one, and the binary in /usr/local/bin, ahead of
/usr/bin on PATH): dpkg takes over cleanly, or refuses before unpacking anything and names the
step to take. Real dpkg and maintainer scripts in the cached Debian root (overlay, as
test_deb.py); the package around a stand-in agent file, since only its scripts are on trial."""

from __future__ import annotations

import io
import os
import platform
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.artifacts import PUBLISHER  # the test releases' publisher
from tests.integration.machines import cached_root

pytestmark = [pytest.mark.machine]
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))
import deb  # noqa: E402  (deploy/deb.py)
from publisher import Publisher  # noqa: E402  (deploy/publisher.py)

UNIT = "etc/systemd/system/nodemanager.service"
WANTS = "etc/systemd/system/multi-user.target.wants/nodemanager.service"
# upstream's docs/deployment.md, "Running as a systemd service (Linux)"
GUIDE_UNIT = """\
[Unit]
Description=nodemanager
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=/usr/local/bin/nodemanager --kubeconfig /etc/nodemanager/kubeconfig
Restart=on-failure
RestartSec=10s

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    agent = out / "agent"
    # a shell script the package's licence reading takes for the agent file: a zip (read from
    # its end) behind the script, which exits before reaching it
    script = b"#!/bin/sh\necho 'nodemanager (this project)'\nexit 0\n"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("__main__.py", "")
        zf.writestr("THIRD-PARTY-NOTICES", "none: a stand-in agent file\n")
    agent.write_bytes(script + archive.getvalue())
    arch = platform.machine() if platform.machine() in deb.DEB_ARCH else "x86_64"
    tests = Publisher(PUBLISHER["NODEMANAGER_MAINTAINER"], PUBLISHER["NODEMANAGER_URL"])
    return deb.build_deb(agent, out, "0.0.1", arch, tests)


@pytest.fixture
def host(tmp_path):
    """A Debian root set up as upstream's guide says: its unit enabled, its binary (an ELF)."""
    if os.geteuid() != 0:
        pytest.skip("dpkg --root and overlay mounts need root")
    lower = cached_root("systemd")
    upper, work, merged = (tmp_path / name for name in ("upper", "work", "merged"))
    for d in (upper, work, merged):
        d.mkdir()
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(merged)], check=True)
    try:
        (merged / UNIT).write_text(GUIDE_UNIT)
        shutil.copy2(merged / "bin" / "true", merged / "usr/local/bin/nodemanager")
        (merged / WANTS).parent.mkdir(parents=True, exist_ok=True)
        (merged / WANTS).symlink_to("/" + UNIT)
        yield merged
    finally:
        subprocess.run(["umount", str(merged)], check=True)


def dpkg(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["dpkg", f"--root={root}", *args], capture_output=True, text=True)


def test_the_package_takes_over_upstreams_guide_layout(host, package):
    done = dpkg(host, "-i", str(package))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (host / "usr/local/bin/nodemanager.upstream").is_file()  # off PATH all the same
    assert not (host / "usr/local/bin/nodemanager").exists()
    # upstream's unit and binary moved aside (the way back), this package's unit enabled
    assert not (host / UNIT).exists() and (host / f"{UNIT}.upstream").read_text() == GUIDE_UNIT
    assert not (host / "usr/local/bin/nodemanager").exists()
    assert (host / "usr/local/bin/nodemanager.upstream").is_file()
    assert os.readlink(host / WANTS) == "/lib/systemd/system/nodemanager.service"
    assert f"moved /{UNIT} (it shadowed the packaged unit)" in done.stderr
    found = subprocess.run(
        ["chroot", str(host), "sh", "-c", "command -v nodemanager && nodemanager"],
        capture_output=True,
        text=True,
    )
    assert found.stdout.splitlines() == ["/usr/bin/nodemanager", "nodemanager (this project)"]
    # the node's kubeconfig path is the one upstream's unit used
    unit = (host / "lib/systemd/system/nodemanager.service").read_text()
    assert "ExecStart=/usr/bin/nodemanager --kubeconfig /etc/nodemanager/kubeconfig" in unit
    # a later upgrade finds nothing to take over and changes nothing of it
    again = dpkg(host, "-i", str(package))
    assert again.returncode == 0 and "moved" not in again.stderr, again.stderr


def test_a_unit_with_flags_it_cannot_carry_is_refused_with_the_step_to_take(host, package):
    flagged = GUIDE_UNIT.replace(
        "kubeconfig\n", "kubeconfig -configset.file-bucket.path=/srv/fb\n", 1
    )
    (host / UNIT).write_text(flagged)
    refused = dpkg(host, "-i", str(package))
    assert refused.returncode != 0
    step = f"mv /{UNIT} /{UNIT}.upstream && systemctl daemon-reload"
    assert step in refused.stderr, refused.stderr
    assert 'NODEMANAGER_ARGS="-configset.file-bucket.path=/srv/fb"' in refused.stderr
    assert not (host / "usr/bin/nodemanager").exists()  # nothing unpacked
    assert (host / UNIT).read_text() == flagged  # nothing moved
    # The step as given, and the install goes through.
    (host / UNIT).rename(host / f"{UNIT}.upstream")
    done = dpkg(host, "-i", str(package))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (host / "usr/local/bin/nodemanager.upstream").is_file()  # off PATH all the same
    assert not (host / "usr/local/bin/nodemanager").exists()
