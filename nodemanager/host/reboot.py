"""Whether this host needs a reboot after an upgrade, and rebooting it.

Three signs, any of which is enough: Debian's ``/run/reboot-required`` (written by packages
such as the kernel's), ``needs-restarting -r`` exiting 1 (Fedora/RHEL, dnf-utils), and a kernel
other than the running one installed (the running release's ``/lib/modules`` directory is gone
or a newer one appeared, which is how Arch and Alpine show it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def installed_kernels(root: str = "/") -> frozenset[str]:
    modules = Path(root) / "lib" / "modules"
    try:
        return frozenset(p.name for p in modules.iterdir() if p.is_dir())
    except OSError:
        return frozenset()


def reboot_required(kernels_before: frozenset[str], root: str = "/") -> str | None:
    """Why a reboot is needed now, or None. ``kernels_before``: installed_kernels() taken before
    the upgrade."""
    flag = Path(root) / "run" / "reboot-required"
    if flag.exists():
        return f"{flag} exists"
    running = os.uname().release
    after = installed_kernels(root)
    if after and kernels_before and after != kernels_before:
        return f"kernels changed: {', '.join(sorted(after - kernels_before)) or 'removed'}"
    if kernels_before and running in kernels_before and running not in after:
        return f"the running kernel {running} was replaced"
    if root == "/" and shutil.which("needs-restarting"):
        proc = subprocess.run(["needs-restarting", "-r"], capture_output=True, text=True)
        if proc.returncode == 1:
            return "needs-restarting -r: " + (proc.stdout.strip().splitlines() or ["reboot"])[0]
    return None


def reboot_command() -> list[str]:
    """systemd's or the classic shutdown, whichever the host has."""
    if os.path.isdir("/run/systemd/system") and shutil.which("systemctl"):
        return ["systemctl", "reboot"]
    return ["shutdown", "-r", "now"]
