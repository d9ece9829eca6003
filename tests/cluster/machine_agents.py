"""`nodemanager run` inside a booted machine (tests/integration/machines.py) against the test
control plane: the machine shares the host's network, so the API server is reachable."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import yaml

from tests.integration.helpers import NODEMANAGER
from tests.integration.machines import Machine


def portable_kubeconfig(source: str, dest: Path) -> Path:
    """The admin kubeconfig with its certificate files inlined, readable inside the machine."""
    cfg = yaml.safe_load(Path(source).read_text())
    fields = {"clusters": ("certificate-authority",), "users": ("client-certificate", "client-key")}
    for item, names in fields.items():
        for entry in cfg[item]:
            body = entry[item[:-1]]
            for name in names:
                if name in body:
                    data = Path(body.pop(name)).read_bytes()
                    body[f"{name}-data"] = base64.b64encode(data).decode()
    dest.write_text(yaml.safe_dump(cfg))
    dest.chmod(0o600)
    return dest


class MachineAgent:
    """One agent process in ``machine``, named ``host``, its log in ``logs``."""

    def __init__(self, machine: Machine, kubeconfig: Path, namespace: str, host: str, *extra: str):
        self.machine, self.host = machine, host
        self.log_path = machine.shared / f"{host}.agent.log"
        self.argv = [
            "nsenter", "-t", str(machine.leader), "-m", "-u", "-i", "-n", "-p", "--",
            NODEMANAGER, "run", "--kubeconfig", str(kubeconfig), "--namespace", namespace,
            "--hostname", host, "--state-dir", f"/var/lib/nm-{host}",
            "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
            "--log-format", "text", *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> MachineAgent:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            assert self.proc
            self.proc.terminate()  # nsenter ends when the agent does; the machine's end kills both
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
