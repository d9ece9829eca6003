"""A booted systemd, for real service tests: systemd-nspawn on a cached debootstrap root.

The root (Debian minbase with systemd and dbus) is built once with debootstrap and cached under
~/.cache/nodemanager/ keyed by suite and recipe version. Each machine boots it with
`--volatile=overlay`, so every change lands in a tmpfs and the cached root stays clean. The
test's Python and this checkout are bind-mounted read-only at their own paths, so nodemanager
runs inside the machine exactly as on a host: `nsenter` into its namespaces, then
`nodemanager apply` with the local connection, the fast path and systemctl all seeing the
machine's systemd.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

SUITE = "bookworm"
RECIPE = 1  # bump when the packages below change
PACKAGES = "systemd,systemd-sysv,dbus,python3"  # python3 brings the shared libraries the test interpreter links
MIRROR = os.environ.get("NODEMANAGER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager" / f"nspawn-{SUITE}-{RECIPE}"
REPO = Path(__file__).resolve().parents[2]


def base_root() -> Path:
    """The cached root, built on first use (about 95 s); fails saying why when it cannot be."""
    if (CACHE / "etc" / "os-release").exists():
        return CACHE
    for tool in ("debootstrap", "systemd-nspawn", "nsenter"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} not found: `make deps` installs debootstrap and systemd-container")
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{CACHE.name}-", dir=CACHE.parent))
    try:
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE, str(staging), MIRROR],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"debootstrap failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        staging.rename(CACHE)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return CACHE


class Machine:
    def __init__(self, shared: Path):
        self.shared = shared  # bind-mounted read-write at the same path, for ConfigSet files
        self.name = f"nmtest-{uuid.uuid4().hex[:8]}"
        self.proc: subprocess.Popen | None = None
        self.leader: int | None = None
        self.log = shared / f"{self.name}.console"

    def start(self, timeout: float = 90) -> "Machine":
        python_prefix = Path(sys.base_prefix).resolve()
        argv = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "-b", "-D", str(base_root()),
                "--volatile=overlay", f"--machine={self.name}",
                f"--bind-ro={REPO}", f"--bind-ro={python_prefix}", f"--bind={self.shared}"]
        with open(self.log, "wb") as console:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited {self.proc.returncode}:\n{self.log.read_text(errors='replace')[-3000:]}")
            self.leader = self.leader or self._child()
            if self.leader:
                state = self.run("systemctl", "is-system-running").stdout.strip()
                if state in ("running", "degraded"):
                    return self
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} did not boot in {timeout} s:\n{self.log.read_text(errors='replace')[-3000:]}")

    def _child(self) -> int | None:
        """The machine's PID 1 as the host sees it: systemd-nspawn's child."""
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            children = (task / "children").read_text().split()
            if children:
                return int(children[0])
        return None

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run a command inside the machine (all its namespaces, its root)."""
        return subprocess.run(["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "--", *argv],
                              capture_output=True, text=True, timeout=timeout)

    def path(self, inside: str) -> Path:
        """A path inside the machine, as the host can read it."""
        return Path(f"/proc/{self.leader}/root{inside}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.leader, signal.SIGRTMIN + 4)  # systemd: orderly poweroff
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
