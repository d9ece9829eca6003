"""`make dev-cluster` / `make dev-cluster-stop`: a control plane that outlives the command.

State (certificates, etcd data, logs, pids) lives under ~/.cache/nodemanager/dev-cluster/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys

from tests.controlplane.build import CACHE
from tests.controlplane.cluster import ControlPlane

STATE_DIR = CACHE / "dev-cluster"
PIDS = STATE_DIR / "pids.json"


def start() -> int:
    if PIDS.exists():
        print(
            f"a dev cluster seems to run already ({PIDS}); `make dev-cluster-stop` first",
            file=sys.stderr,
        )
        return 1
    shutil.rmtree(STATE_DIR, ignore_errors=True)
    cp = ControlPlane(STATE_DIR).start()
    PIDS.write_text(json.dumps({"etcd": cp._etcd.pid, "kube-apiserver": cp._apiserver.pid}))
    import subprocess

    subprocess.run(
        ["kubectl", "--kubeconfig", str(cp.kubeconfig), "apply", "-f", "crds/"], check=False
    )
    print(f"control plane at {cp.server}; logs in {STATE_DIR}")
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


def stop() -> int:
    if not PIDS.exists():
        print("no dev cluster running", file=sys.stderr)
        return 0
    for pid in json.loads(PIDS.read_text()).values():
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    PIDS.unlink()
    print("dev cluster stopped")
    return 0
