"""Start the real fleet controller (`nodemanager controller`) as a process, optionally with the
credential of the ServiceAccount deploy/controller.yaml ships (its exact permissions)."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.cluster.agent import NODEMANAGER
from tests.controlplane.cluster import free_port

SHIPPED = Path(__file__).resolve().parents[2] / "deploy" / "controller.yaml"
ACCOUNT = "fleet-controller"


def shipped_rbac(namespace: str) -> list[dict[str, Any]]:
    """deploy/controller.yaml's ServiceAccount, Roles and bindings, moved to ``namespace``
    (cluster-wide ones renamed after it, so tests in other namespaces keep theirs)."""
    docs = [d for d in yaml.safe_load_all(SHIPPED.read_text()) if d and d["kind"] != "Deployment"]
    for d in docs:
        if d["kind"].startswith("Cluster"):
            d["metadata"]["name"] += f"-{namespace}"
            if "roleRef" in d:
                d["roleRef"]["name"] += f"-{namespace}"
        else:
            d["metadata"]["namespace"] = namespace
        for subject in d.get("subjects") or []:
            subject["namespace"] = namespace
    return docs


def shipped_kubeconfig(admin_kubeconfig: str, namespace: str, directory: Path) -> str:
    """Apply the shipped RBAC and return a kubeconfig holding a token of its ServiceAccount, so a
    controller started with it has exactly the permissions deploy/controller.yaml grants."""

    def kubectl(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", admin_kubeconfig, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(shipped_rbac(namespace)))
    token = kubectl("create", "token", ACCOUNT, "-n", namespace, "--duration", "4h").strip()
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": ACCOUNT, "context": {"cluster": cluster["name"], "user": ACCOUNT}}],
        "current-context": ACCOUNT,
    }
    path = directory / f"{ACCOUNT}-{namespace}.kubeconfig"
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config))
    return str(path)


class ControllerProcess:
    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        log_dir: Path,
        *extra: str,
        name: str = "controller",
        command: Sequence[str] = (NODEMANAGER,),
        env: Mapping[str, str] | None = None,
    ):
        """``command`` runs nodemanager (e.g. the zipapp: [python, bin/nodemanager])."""
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = log_dir / f"{name}.log"
        self.env = {**os.environ, **(env or {})}
        self.argv = [
            *command,
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
                self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env
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

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

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
