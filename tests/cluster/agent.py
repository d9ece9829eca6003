"""Start the real agent (`nodemanager run`) as a process against the test control plane."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.cluster.helpers import eventually
from tests.controlplane.cluster import free_port

NODEMANAGER = str(Path(sys.executable).with_name("nodemanager"))


class Agent:
    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        hostname: str,
        state_dir: Path,
        *extra: str,
        env: dict | None = None,
    ):
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = state_dir.parent / f"agent-{hostname}.log"
        self.argv = [
            NODEMANAGER,
            "run",
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            namespace,
            "--hostname",
            hostname,
            "--state-dir",
            str(state_dir),
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "--log-format",
            "text",
            *extra,
        ]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30) -> Agent:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        eventually(
            lambda: self.get("/healthz", self.health_port) == 200,
            timeout=timeout,
            message="agent /healthz",
        )
        return self

    def get(self, path: str, port: int) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def metric(self, name: str, labels: str = "") -> float:
        """Sum of a metric's samples whose label text contains ``labels``."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            text = r.read().decode()
        total = 0.0
        for m in re.finditer(rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", text, re.M):
            if labels in (m.group(1) or ""):
                total += float(m.group(2))
        return total

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 60) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired as err:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("agent did not stop within 60 s of SIGTERM") from err
        return self.proc.returncode if self.proc else 0
