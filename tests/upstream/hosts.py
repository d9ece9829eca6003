"""One side of the differential suite: a booted machine, an API server and one agent on it.

The machine boots the cached ``systemd-arch`` root (tests/integration/machines.py: Debian's
systemd and pacman under an os-release saying ``ID=arch``, the only kind of Linux host
upstream's agent serves) on a volatile overlay, with the host's network (the API server is on
127.0.0.1). Its pacman reads a local repository (tests/integration/pacman_repo.py builds the
packages) bound read-only at the same path. The agent runs inside as a transient systemd unit
(``systemd-run``), so it is a service of the machine's own systemd as on a real host: stopped,
signalled and logged through systemctl and journalctl.

A side's state is read inside the machine in one go (``snapshot``): every entry under the
case roots, the installed packages, the services' enabled/active states, how many times each
execution and each service start happened (the cases make them append a line to a counter).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.cluster.helpers import eventually
from tests.controlplane.cluster import ControlPlane, free_port
from tests.integration.machines import REPO, Machine

GROUP, VERSION, NS = "common.nodemanager", "v1", "nodemanager"
HOSTNAME = "nmdiff"  # both machines: the ManagedNodes of the two sides have the same name
ROOTS = ("/srv/nmdiff",)  # every case's files live under /srv/nmdiff/<case>
COUNTERS = "/var/lib/nmdiff"  # runs/<execution>, starts/<unit>: one line per run or start
UNIT = "nm-agent"  # the transient unit the agent runs as

# Read inside the machine with its own python3: paths, packages, services, counters as JSON.
_SNAPSHOT = textwrap.dedent(
    r"""
    import grp, hashlib, json, os, pwd, stat, subprocess, sys
    roots, extra, units, stamps = json.loads(sys.argv[1])
    def name(table, number):
        try:
            return table(number)[0]
        except KeyError:
            return str(number)
    def entry(path):
        st = os.lstat(path)
        e = {"mode": oct(stat.S_IMODE(st.st_mode)), "owner": name(pwd.getpwuid, st.st_uid),
             "group": name(grp.getgrgid, st.st_gid)}
        if stat.S_ISLNK(st.st_mode):
            e.update(type="link", target=os.readlink(path))
            del e["mode"]
            if stamps:
                e["stamp"] = [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
        elif stat.S_ISDIR(st.st_mode):
            e["type"] = "dir"
            if stamps:
                e["stamp"] = [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
        else:
            data = open(path, "rb").read()
            text = data.decode(errors="replace")
            e.update(type="file", content=text if len(text) < 400 else
                     hashlib.sha256(data).hexdigest())
            if stamps:  # a rewrite changes mtime (same content) or the inode (a rename)
                e["stamp"] = [st.st_ino, st.st_mtime_ns, st.st_ctime_ns]
        return e
    files = {}
    def walk(top):
        if not os.path.lexists(top):
            return
        files[top] = entry(top)
        if os.path.isdir(top) and not os.path.islink(top):
            for child in sorted(os.listdir(top)):
                walk(os.path.join(top, child))
    for top in roots:
        walk(top)
    for path in extra:
        if os.path.lexists(path):
            files[path] = entry(path)
    q = subprocess.run(["pacman", "-Q"], capture_output=True, text=True)
    packages = dict(line.split() for line in q.stdout.splitlines() if line.strip())
    services = {}
    for unit in units:
        enabled = subprocess.run(["systemctl", "is-enabled", unit], capture_output=True, text=True)
        active = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True)
        services[unit] = {"enabled": enabled.stdout.strip() or "absent",
                          "active": active.stdout.strip()}
    counts = {}
    for kind in ("runs", "starts"):
        d = os.path.join(COUNTERS, kind)
        for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            counts[f"{kind}/{f}"] = len(open(os.path.join(d, f)).read().splitlines())
    try:  # package transactions pacman made (a sync or a query logs none of these)
        log = open("/var/log/pacman.log").read()
        counts["pacman-transactions"] = sum(
            1 for line in log.splitlines()
            if any(f"[ALPM] {w} " in line for w in
                   ("installed", "removed", "upgraded", "reinstalled", "downgraded")))
    except FileNotFoundError:
        counts["pacman-transactions"] = 0
    print(json.dumps({"files": files, "packages": packages, "services": services,
                      "counts": counts}))
    """
).replace("COUNTERS", repr(COUNTERS))


@dataclass
class Side:
    """``upstream`` or ``ours``: its control plane, its machine and its agent's command."""

    name: str
    plane: ControlPlane
    machine: Machine
    agent_argv: list[str]
    metrics_port: int
    health_port: int
    unit: str = UNIT  # the systemd unit the agent runs as
    _api: client.ApiClient | None = None

    # -- the machine ----------------------------------------------------------------------

    def sh(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return self.machine.run("sh", "-c", script, timeout=timeout)

    def check(self, script: str, timeout: float = 300) -> str:
        done = self.sh(script, timeout)
        assert done.returncode == 0, f"{self.name}: {script}\n{done.stdout}{done.stderr}"
        return done.stdout

    def snapshot(
        self, extra: list[str], units: list[str], stamps: bool = False, roots: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """The host's state; with ``stamps``, each file's inode, mtime and ctime too."""
        args = json.dumps([[*ROOTS, *roots], extra, units, stamps])
        done = self.machine.run("python3", "-c", _SNAPSHOT, args)
        assert done.returncode == 0, f"{self.name}: snapshot failed: {done.stderr}"
        state: dict[str, Any] = json.loads(done.stdout)
        return state

    # -- the agent ------------------------------------------------------------------------

    def start_agent(self) -> None:
        argv = ["systemd-run", f"--unit={self.unit}", "--collect", "--setenv=HOME=/root"]
        self.check(shlex.join([*argv, *self.agent_argv]))

    def stop_agent(self) -> None:
        self.sh(f"systemctl stop {self.unit}", timeout=120)

    def hup(self) -> None:
        """SIGHUP once the agent answers /healthz: its handler is installed by then (before
        it, SIGHUP's default action ends the process, ours as upstream's)."""
        eventually(self.healthy, timeout=300, interval=0.5, message=f"{self.name} /healthz")
        self.check(f"systemctl kill --kill-who=main -s HUP {self.unit}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}/healthz", timeout=2
            ) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def agent_running(self) -> bool:
        return self.sh(f"systemctl is-active --quiet {self.unit}").returncode == 0

    def log(self, lines: int = 200) -> str:
        return self.sh(f"journalctl -u {self.unit} --no-pager -n {lines} -o cat").stdout

    # -- the API --------------------------------------------------------------------------

    def api(self) -> client.ApiClient:
        """One client per side, closed with ``close``."""
        if self._api is None:
            self._api = config.new_client_from_config(str(self.plane.kubeconfig))
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            text: str = r.read().decode()
        return text


def upstream_argv(binary: Path, plane: ControlPlane, metrics: int, health: int) -> list[str]:
    """Upstream's agent as its deployment guide starts it (Go flags), filebucket on."""
    return [
        str(binary),
        f"-kubeconfig={plane.kubeconfig}",
        f"-namespace={NS}",
        f"-metrics-bind-address=127.0.0.1:{metrics}",
        f"-health-probe-bind-address=127.0.0.1:{health}",
    ]


def ours_argv(plane: ControlPlane, metrics: int, health: int, drift_check: str = "0") -> list[str]:
    """Our agent from this checkout's virtualenv (bound read-only at its own path); passes
    come from events and SIGHUP, as upstream's do, unless ``drift_check`` says otherwise."""
    return [
        str(Path(sys.executable).with_name("nodemanager")),
        "run",
        f"--kubeconfig={plane.kubeconfig}",
        f"--namespace={NS}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        f"--drift-check-interval={drift_check}",
        "--log-format=text",
    ]


def boot(
    name: str,
    plane: ControlPlane,
    shared: Path,
    repo: Path,
    upstream: Path | None,
    drift_check: str = "0",
) -> Side:
    """A booted ``systemd-arch`` machine named HOSTNAME with the pacman repository ``repo``
    and the API server's files read-only inside; its agent is upstream's binary ``upstream``,
    or ours when None."""
    binds = [("ro", REPO), ("ro", Path(sys.base_prefix).resolve()), ("ro", plane.dir)]
    binds += [("ro", repo)] + ([("ro", upstream.parent)] if upstream else [])
    machine = Machine("systemd", shared, hostname=HOSTNAME, recipe="systemd-arch", binds=binds)
    try:
        machine.start(timeout=180)
    except Exception:
        machine.stop()
        raise
    metrics, health = free_port(), free_port()
    argv = (
        upstream_argv(upstream, plane, metrics, health)
        if upstream
        else ours_argv(plane, metrics, health, drift_check)
    )
    return Side(name, plane, machine, argv, metrics, health)
