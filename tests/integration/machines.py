"""Booted init systems for real service tests: systemd and OpenRC, each as PID 1 of its own machine.

Roots are Debian minbase trees built once with debootstrap and cached under
~/.cache/nodemanager/ keyed by suite and recipe; every machine boots a copy-on-write overlay
(tmpfs upper layer), so the cached root stays clean. The test's Python and this checkout are
bind-mounted read-only at their own paths, so nodemanager runs inside the machine exactly as on
a host: `nsenter` into its namespaces, then `nodemanager apply` with the local connection.

- systemd: `systemd-nspawn --register=no --keep-unit -b --volatile=overlay`.
- ``persistent=True`` (tests/e2e): the overlay's upper layer is a directory on disk instead of
  tmpfs, so what the machine wrote survives a reboot, and a reboot is the launcher started again
  on the same layer (nspawn with --keep-unit exits 133 on reboot, like under systemd-nspawn@).
- OpenRC (Debian's openrc, the init of Alpine): `unshare` pid/mount/uts/ipc namespaces, an
  overlay root, `pivot_root`, then `openrc-init` as PID 1. The cgroup hierarchy is never
  mounted inside (no sysfs, rc_controller_cgroups=NO): the host's cgroups stay untouched.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

SUITE = "bookworm"
MIRROR = os.environ.get("NODEMANAGER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager"
REPO = Path(__file__).resolve().parents[2]
REBOOTED = 133  # systemd-nspawn's exit status when the machine rebooted itself


def _openrc_for_containers(root: Path) -> None:
    conf = root / "etc" / "rc.conf"
    conf.write_text(conf.read_text() + '\nrc_sys="docker"\nrc_controller_cgroups="NO"\n')
    for service in ("cgroups", "hwclock.sh", "procps"):  # need /sys, a clock or kernel tunables
        (root / "etc" / "runlevels" / "sysinit" / service).unlink(missing_ok=True)


def _arch_like(root: Path) -> None:
    """Debian's systemd and pacman under an os-release saying Arch: upstream's agent serves only
    the os-release IDs arch, alpine and freebsd (tests/upstream runs it beside ours)."""
    release = root / "etc" / "os-release"
    release.unlink()  # Debian's is a link to /usr/lib/os-release
    release.write_text('NAME="Arch Linux"\nID=arch\nBUILD_ID=rolling\n')
    # SSH host keys, so that both agents have some to report
    subprocess.run(["ssh-keygen", "-A", "-f", str(root)], check=True, capture_output=True)


# name -> (recipe version, packages, finishing step); bump the version when a recipe changes.
# python3 brings the shared libraries the test's interpreter links against.
RECIPES: dict[str, tuple[int, str, Callable[[Path], None] | None]] = {
    # python3-apt: ansible.builtin.apt respawns under the system Python that has the apt bindings.
    # libpam-systemd: the session a user's own manager (user@UID.service) needs for user services.
    "systemd": (3, "systemd,systemd-sysv,dbus,libpam-systemd,python3,python3-apt", None),
    "openrc": (1, "openrc,python3,procps", _openrc_for_containers),
    # booted with init "systemd": Machine("systemd", ..., recipe="systemd-arch")
    "systemd-arch": (
        1,
        "systemd,systemd-sysv,dbus,python3,pacman-package-manager,openssh-client",
        _arch_like,
    ),
}


def cached_root(init: str) -> Path:
    """The cached root for ``init``, built on first use (about a minute); fails saying why."""
    version, packages, finish = RECIPES[init]
    root = CACHE / f"{init}-{SUITE}-{version}"
    if (root / "etc" / "os-release").exists():
        return root
    for tool in (
        "debootstrap",
        "nsenter",
        "unshare",
        *(["systemd-nspawn"] if init.startswith("systemd") else []),
    ):
        if shutil.which(tool) is None:
            raise RuntimeError(
                f"{tool} not found: `make deps` installs debootstrap and systemd-container"
            )
    CACHE.mkdir(parents=True, exist_ok=True)
    # Suites run side by side (tests/parallel.py): one builds, the others wait and reuse it.
    with (CACHE / f".{root.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "etc" / "os-release").exists():
            _build_root(root, packages, finish)
    return root


def _build_root(root: Path, packages: str, finish: Callable[[Path], None] | None) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=CACHE))
    try:
        proc = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={packages}",
                SUITE,
                str(staging),
                MIRROR,
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"debootstrap failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        if finish:
            finish(staging)
        staging.rename(root)  # atomic: a half-built root is never taken for a cached one
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# Run by `sh` in fresh namespaces: overlay root, bind mounts, pivot_root, then OpenRC as PID 1.
_OPENRC_BOOT = r"""
set -e
base=$1 work=$2 name=$3 persistent=$4; shift 4
[ "$persistent" = yes ] || mount -t tmpfs tmpfs "$work"
mkdir -p "$work/upper" "$work/work" "$work/root"
hostname "$name"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/work" "$work/root"
r="$work/root"
for spec in "$@"; do
  mode=${spec%%:*} path=${spec#*:}
  mkdir -p "$r$path"
  mount --bind "$path" "$r$path"
  if [ "$mode" = ro ]; then mount -o remount,bind,ro "$r$path"; fi
done
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
mount -t tmpfs tmpfs "$r/run"
cd "$r" && mkdir -p oldroot && pivot_root . oldroot && umount -l /oldroot && rmdir /oldroot
exec /sbin/openrc-init
"""


# systemd with a persistent layer: the overlay is mounted in a private mount namespace, so it
# goes away with the machine and never shows on the host.
_SYSTEMD_OVERLAY = r"""
set -e
base=$1 work=$2; shift 2
mkdir -p "$work/upper" "$work/work" "$work/root"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/work" "$work/root"
exec "$@"
"""


class Machine:
    """One booted machine. ``shared`` is bind-mounted read-write at the same path inside.

    ``hostname`` names the machine (its UTS hostname); ``binds`` replaces the default read-only
    binds of this checkout and the test's Python (tests/e2e runs the built agent, not this tree).
    """

    def __init__(
        self,
        init: str,
        shared: Path,
        *,
        hostname: str | None = None,
        persistent: bool = False,
        binds: list[tuple[str, Path]] | None = None,
        recipe: str | None = None,
    ):
        self.init, self.shared, self.persistent = init, shared, persistent
        self.recipe = recipe or init  # the cached root it boots (RECIPES)
        self.name = hostname or f"nmtest-{uuid.uuid4().hex[:8]}"
        self.binds = (
            [("ro", REPO), ("ro", Path(sys.base_prefix).resolve())] if binds is None else binds
        ) + [("rw", shared)]
        self.proc: subprocess.Popen | None = None
        self.leader: int | None = None
        self.console = shared / f"{self.name}.console"
        self.overlay = shared / f"{self.name}.overlay"  # upper/ is what the machine changed
        if persistent:  # the name survives the machine's own /etc/hostname (copied by debootstrap)
            etc = self.overlay / "upper" / "etc"
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hostname").write_text(self.name + "\n")

    def _argv(self) -> list[str]:
        binds = self.binds
        if self.init == "systemd":
            nspawn = [
                "systemd-nspawn",
                "--register=no",
                "--keep-unit",
                "--quiet",
                "-b",
                f"--machine={self.name}",
                *(f"--bind-ro={p}" if mode == "ro" else f"--bind={p}" for mode, p in binds),
            ]
            if not self.persistent:
                return [*nspawn, "-D", str(cached_root(self.recipe)), "--volatile=overlay"]
            return [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                _SYSTEMD_OVERLAY,
                "boot",
                str(cached_root(self.recipe)),
                str(self.overlay),
                *nspawn,
                "-D",
                str(self.overlay / "root"),
            ]
        work = self.overlay
        work.mkdir(exist_ok=True)
        return [
            "unshare",
            "--pid",
            "--mount",
            "--uts",
            "--ipc",
            "--fork",
            "--propagation",
            "private",
            "sh",
            "-c",
            _OPENRC_BOOT,
            "boot",
            str(cached_root(self.recipe)),
            str(work),
            self.name,
            "yes" if self.persistent else "no",
            *(f"{mode}:{p}" for mode, p in binds),
        ]

    def _booted(self) -> bool:
        if self.init == "systemd":
            return self.run("systemctl", "is-system-running").stdout.strip() in (
                "running",
                "degraded",
            )
        return (
            self.path("/run/openrc/softlevel").exists()
            and self.run("rc-status", "--runlevel").stdout.strip() == "default"
        )

    def start(self, timeout: float = 90) -> Machine:
        self.leader = None
        with open(self.console, "ab") as console:
            self.proc = subprocess.Popen(
                self._argv(),
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.init} machine exited {self.proc.returncode}:\n{self._tail()}"
                )
            if self.leader and not Path(f"/proc/{self.leader}").exists():
                self.leader = None  # a short-lived child was taken for PID 1
            self.leader = self.leader or self._child()
            if self.leader and self._booted():
                return self
            time.sleep(0.2)
        jobs = self.run("systemctl", "list-jobs", "--no-pager").stdout if self.leader else ""
        raise TimeoutError(
            f"{self.init} machine did not boot in {timeout} s:\n{self._tail()}\n{jobs}"
        )

    def reboot(self, timeout: float = 120) -> Machine:
        """Reboot from inside; returns once the machine booted again (``persistent`` only)."""
        assert self.persistent, "a reboot keeps nothing on a tmpfs layer"
        old = self.leader
        command = (
            ["systemctl", "reboot"] if self.init == "systemd" else ["openrc-shutdown", "-r", "now"]
        )
        self.run(*command)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:  # the launcher ended with the reboot: power on again
                return self.start(timeout=max(deadline - time.monotonic(), 30))
            leader = self._child()
            if leader and leader != old:
                self.leader = leader
                if self._booted():
                    return self
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} did not come back from reboot:\n{self._tail()}")

    def relaunch_if_rebooted(self, timeout: float = 120) -> bool:
        """Power the machine on again when it rebooted by itself (``systemctl reboot`` inside:
        nspawn exits 133), as systemd-nspawn@.service does with RestartForceExitStatus=133.
        Whether it did. Call it while waiting for something a reboot from inside may cause."""
        if self.proc is None or self.proc.poll() != REBOOTED:
            return False
        self.start(timeout=timeout)
        return True

    def _tail(self) -> str:
        return self.console.read_text(errors="replace")[-3000:]

    def _child(self) -> int | None:
        """The machine's PID 1 as the host sees it: the launcher's child."""
        if self.persistent and self.init == "systemd":  # not the shell's `mount` before its exec
            try:
                if Path(f"/proc/{self.proc.pid}/comm").read_text().strip() != "systemd-nspawn":
                    return None
            except FileNotFoundError:
                return None
        try:
            for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
                children = (task / "children").read_text().split()
                if children:
                    return int(children[0])
        except FileNotFoundError:  # the launcher just ended (poweroff, reboot)
            pass
        return None

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run a command inside the machine (all its namespaces, its root)."""
        return subprocess.run(
            ["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-n", "-p", "--", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def path(self, inside: str) -> Path:
        """A path inside the machine, as the host can read it."""
        return Path(f"/proc/{self.leader}/root{inside}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            if self.init == "systemd":
                os.kill(self.leader, signal.SIGRTMIN + 4)  # systemd: orderly poweroff
            else:
                os.kill(
                    self.leader, signal.SIGKILL
                )  # PID 1 gone: the kernel ends the namespace, mounts go with it
        except (ProcessLookupError, TypeError):  # never booted, or rebooting right now
            os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
