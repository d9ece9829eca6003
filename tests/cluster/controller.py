"""Start the real fleet controller (`nodemanager controller`) as a process."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from tests.cluster.agent import NODEMANAGER
from tests.controlplane.cluster import free_port


class ControllerProcess:
    def __init__(
        self, kubeconfig: str, namespace: str, log_dir: Path, *extra: str, name: str = "controller"
    ):
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = log_dir / f"{name}.log"
        self.argv = [
            NODEMANAGER,
            "controller",
            "--kubeconfig",
            kubeconfig,
            "--namespace",
            namespace,
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "--log-format",
            "text",
            *extra,
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ControllerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)
            )
        return self

    def probe(self, path: str) -> int:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}{path}", timeout=2
            ) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def leading(self) -> bool:
        return self.probe("/readyz") == 200

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout: float = 30) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("controller did not stop within 30 s of SIGTERM") from None
        return self.proc.returncode if self.proc else 0
