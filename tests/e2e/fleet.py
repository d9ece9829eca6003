"""Booted machines onboarded as the README's "Connecting a host" says, running the built agent.

Each machine is a persistent-overlay machine from tests/integration/machines.py on the host's
network namespace (the API is on 127.0.0.1), with its own hostname, root and state directory.
Nothing of this checkout or the test's Python is mounted inside: the machine runs
/usr/local/bin/nodemanager (the zipapp `make build` writes) with its own python3, under the
project's own unit file (systemd) or OpenRC script (deploy/). Both agents of the same host
network need their own metrics and health ports: they come through NODEMANAGER_ARGS in
/etc/default/nodemanager or /etc/conf.d/nodemanager, as a user would pass flags.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tests.controlplane.cluster import free_port
from tests.integration.machines import Machine, cached_root

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
AGENT = "/usr/local/bin/nodemanager"
# What the README's uninstall section removes; everything else the agent wrote is a managed file.
INSTALLED = {
    "systemd": [
        AGENT,
        "/etc/systemd/system/nodemanager.service",
        "/etc/default/nodemanager",
        "/etc/nodemanager",
        "/var/lib/nodemanager",
        "/var/cache/nodemanager",
    ],
    "openrc": [
        AGENT,
        "/etc/init.d/nodemanager",
        "/etc/conf.d/nodemanager",
        "/etc/nodemanager",
        "/var/lib/nodemanager",
        "/var/cache/nodemanager",
        "/var/log/nodemanager.log",
    ],
}


class Node:
    """One machine of the fleet and the agent service on it."""

    def __init__(self, init: str, hostname: str, shared: Path, node_labels: str):
        self.init, self.name, self.node_labels = init, hostname, node_labels
        self.machine = Machine(init, shared, hostname=hostname, persistent=True, binds=[])
        self.metrics_port, self.health_port = free_port(), free_port()
        self.created_dirs: list[str] = []  # made by install() to hold what it copied
        self.agent = AGENT  # /usr/bin/nodemanager once installed from the Debian package
        self.pristine: dict[str, str] = {}  # snapshot() before onboarding

    # -- the machine --------------------------------------------------------------------

    def start(self) -> Node:
        self.machine.start(timeout=120)
        return self

    def stop(self) -> None:
        self.machine.stop()

    def sh(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run a shell script inside the machine."""
        return self.machine.run("sh", "-c", script, timeout=timeout)

    def check(self, script: str, timeout: float = 300) -> str:
        done = self.sh(script, timeout)
        assert done.returncode == 0, f"{self.name}: {script}: {done.stdout}{done.stderr}"
        return done.stdout

    def put(self, inside: str, data: bytes, mode: int) -> None:
        """Copy a file into the machine (as an admin with scp would)."""
        target = self.machine.path(inside)
        for parent in reversed(Path(inside).parents):  # remembered for uninstall()
            if not self.machine.path(str(parent)).exists():
                self.created_dirs.insert(0, str(parent))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)

    def read(self, inside: str) -> str | None:
        try:
            return self.machine.path(inside).read_text()
        except FileNotFoundError:
            return None

    def write(self, inside: str, text: str) -> None:
        self.machine.path(inside).write_text(text)

    def snapshot(self) -> dict[str, str]:
        """Everything the machine changed from its pristine root: path -> kind, mode and digest."""
        upper, lower = self.machine.overlay / "upper", cached_root(self.init)
        found: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(upper):
            for entry in dirnames + filenames:
                path = Path(dirpath) / entry
                st = path.lstat()
                rel = "/" + str(path.relative_to(upper))
                if stat.S_ISDIR(st.st_mode) and (lower / rel[1:]).is_dir():
                    continue  # copied up to hold a change below it; itself unchanged
                if stat.S_ISREG(st.st_mode):
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
                elif stat.S_ISLNK(st.st_mode):
                    digest = os.readlink(path)
                else:
                    digest = ""
                found[rel] = f"{stat.filemode(st.st_mode)} {st.st_uid}:{st.st_gid} {digest}"
        return found

    # -- onboarding (README "Connecting a host") ------------------------------------------

    def install(self, zipapp: Path, drift_check: str) -> None:
        """Copy the agent, its service definition and its flags onto the machine."""
        self.put(AGENT, zipapp.read_bytes(), 0o755)
        env = self.flags(drift_check)
        if self.init == "systemd":
            unit = (DEPLOY / "nodemanager.service").read_bytes()
            self.put("/etc/systemd/system/nodemanager.service", unit, 0o644)
            self.put("/etc/default/nodemanager", env, 0o644)
        else:
            self.put("/etc/init.d/nodemanager", (DEPLOY / "nodemanager.openrc").read_bytes(), 0o755)
            self.put("/etc/conf.d/nodemanager", env, 0o644)

    def flags(self, drift_check: str) -> bytes:
        """The agent's flags as its environment file says them (NODEMANAGER_ARGS)."""
        args = " ".join(
            [
                f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                f"--drift-check-interval={drift_check}",
                "--log-format=text",
                *([f"--node-labels={self.node_labels}"] if self.node_labels else []),
            ]
        )
        return f"NODEMANAGER_ARGS={shlex.quote(args)}\n".encode()

    def bootstrap(self, bootstrap_kubeconfig: bytes, *flags: str) -> str:
        """`nodemanager bootstrap` on the machine, with the bootstrap kubeconfig copied over."""
        self.put("/root/bootstrap.kubeconfig", bootstrap_kubeconfig, 0o600)
        out = self.check(
            f"{self.agent} bootstrap --bootstrap-kubeconfig /root/bootstrap.kubeconfig "
            + " ".join(map(shlex.quote, flags))
            + " && rm /root/bootstrap.kubeconfig"
        )
        return out

    def enable_now(self) -> None:
        if self.init == "systemd":
            self.check("systemctl daemon-reload && systemctl enable --now nodemanager")
        else:
            self.check("rc-update add nodemanager default && rc-service nodemanager start")

    def uninstall(self) -> None:
        """The README's uninstall steps, run on the machine."""
        if self.init == "systemd":
            self.check("systemctl disable --now nodemanager")
        else:
            self.check("rc-service nodemanager stop && rc-update del nodemanager default")
        self.check("rm -rf " + " ".join(INSTALLED[self.init]))
        for directory in self.created_dirs:  # e.g. /etc/conf.d: Alpine has it, Debian does not
            self.sh(f"rmdir {directory}")
        if self.init == "systemd":
            self.check("systemctl daemon-reload")

    # -- the running agent --------------------------------------------------------------

    def agent_pid(self) -> int | None:
        """The agent's process (the interpreter running the zipapp), not its supervisor."""
        found = {}
        for proc in self.machine.path("/proc").iterdir():  # the machine's own PID namespace
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if argv[:2] == [b"python3", self.agent.encode()]:
                found[int(proc.name)] = parent
        roots = [pid for pid, parent in found.items() if parent not in found]
        return min(roots) if roots else None

    def service_active(self) -> bool:
        if self.init == "systemd":
            return self.sh("systemctl is-active --quiet nodemanager").returncode == 0
        return self.sh("rc-service nodemanager status").returncode == 0

    def service_enabled(self) -> bool:
        if self.init == "systemd":
            return self.sh("systemctl is-enabled --quiet nodemanager").returncode == 0
        return self.machine.path("/etc/runlevels/default/nodemanager").is_symlink()

    def probe(self, path: str = "/readyz") -> int:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}{path}", timeout=2
            ) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def log(self, lines: int = 150) -> str:
        """The agent's journal (systemd) or log file (OpenRC), read inside the machine."""
        if self.machine.leader is None:
            return "(machine not running)"
        if self.init == "systemd":
            done = self.sh(f"journalctl -u nodemanager --no-pager -o short-precise -n {lines}")
        else:
            done = self.sh(f"tail -n {lines} /var/log/nodemanager.log")
        return done.stdout + done.stderr
