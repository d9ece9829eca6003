"""The controller image (deploy/image.py, built by `make release`) runs as deploy/controller.yaml
runs it: unpacked with umoci, its entrypoint with the Deployment's arguments, as the image's
user, on a read-only root in mount and PID namespaces of its own, with the in-cluster credentials
of the shipped ServiceAccount. It takes its Lease and summarises a ConfigSet.

The image is built once per source hash with the release (tests/artifacts.py); this test only
unpacks it (a few seconds)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests import artifacts
from tests.cluster.controller import SHIPPED, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_controller_election import summarised
from tests.cluster.test_daemon import put_configset
from tests.controlplane.cluster import free_port

# the release (and the image) is built in the first test that asks, after any other build
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1800)]

# Run by `sh` in new mount and PID namespaces. The mount points are made first (a runtime does
# the same), then the root is bound onto itself and made read-only under /proc, /dev and the
# ServiceAccount volume; chroot then runs the image's command as its user (no capabilities), in
# the image's environment (the host tools run before it by absolute path or from /usr/bin).
_RUN = r"""
set -e
root=$1 account=$2 user=$3 chroot=$4; shift 4
sa=$root/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$root/proc" "$root/dev" "$sa"
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind "$account" "$sa"
mount -o remount,bind,ro "$sa"
mount -o remount,bind,ro "$root"
exec "$chroot" --userspec="$user" --groups="${user#*:}" "$root" "$@"
"""


def image_config(layout: Path) -> tuple[str, dict]:
    """The layout's one tag and its image config (index -> manifest -> config)."""

    def blob(digest: str) -> dict:
        return json.loads((layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_text())

    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    manifest = blob(entry["digest"])
    return entry["annotations"]["org.opencontainers.image.ref.name"], blob(
        manifest["config"]["digest"]
    )


def deployment_container() -> dict:
    deployment = next(
        d for d in yaml.safe_load_all(SHIPPED.read_text()) if d and d["kind"] == "Deployment"
    )
    return deployment["spec"]["template"]["spec"]


def pod_args(namespace: str, metrics: int, probes: int) -> list[str]:
    """The Deployment's args; its namespace and ports moved to this test's (the test shares the
    host's network and control plane with other tests)."""
    (container,) = deployment_container()["containers"]
    moved = {
        "--namespace=": namespace,
        "--metrics-bind-address=": f"127.0.0.1:{metrics}",
        "--health-probe-bind-address=": f"127.0.0.1:{probes}",
    }
    args = []
    for arg in container["args"]:
        flag = next((f for f in moved if arg.startswith(f)), None)
        args.append(flag + moved[flag] if flag else arg)
    assert args != container["args"], "the Deployment's args changed shape: update pod_args"
    return args


def service_account(kubeconfig: str, namespace: str, directory: Path) -> Path:
    """What a pod of the shipped ServiceAccount has mounted: token, ca.crt, namespace."""
    config = yaml.safe_load(Path(shipped_kubeconfig(kubeconfig, namespace, directory)).read_text())
    account = directory / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(config["users"][0]["user"]["token"])
    shutil.copyfile(config["clusters"][0]["cluster"]["certificate-authority"], account / "ca.crt")
    (account / "namespace").write_text(namespace)
    for path in account.iterdir():
        path.chmod(0o644)  # readable by the image's user, as a projected volume is
    return account


def child(pid: int) -> int | None:
    """The first child of pid (the image's process under `unshare --fork`)."""
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            if children := (task / "children").read_text().split():
                return int(children[0])
    except FileNotFoundError:
        pass
    return None


def test_image_runs_the_controller_as_the_deployment_does(
    api_client, kubeconfig, namespace, control_plane, tmp_path, measured
):
    archive = artifacts.image()
    layout, bundle = tmp_path / "layout", tmp_path / "bundle"
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="data")
    ref, config = image_config(layout)
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{ref}", str(bundle)],
        check=True,
        capture_output=True,
    )
    rootfs = bundle / "rootfs"
    pod = deployment_container()
    (container,) = pod["containers"]
    process = config["config"]
    # what the Deployment leaves to the image: the entrypoint; its user is the pod's
    assert "command" not in container
    name, tag = container["image"].split(":")
    assert archive.name.startswith(f"{name}-{tag}")  # a release's version is the tag
    assert process["User"].split(":")[0] == str(pod["securityContext"]["runAsUser"])
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert not (rootfs / "bin" / "sh").exists() and not (rootfs / "usr" / "bin" / "sh").exists()

    metrics, probes = free_port(), free_port()
    command = process["Entrypoint"] + pod_args(namespace, metrics, probes)
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    env = process["Env"] + [f"KUBERNETES_SERVICE_HOST={host}", f"KUBERNETES_SERVICE_PORT={port}"]
    account = service_account(kubeconfig, namespace, tmp_path)
    log = tmp_path / "image.log"
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [shutil.which("unshare"), "--mount", "--pid", "--fork", "--kill-child"]
            + ["--propagation", "private", "/bin/sh", "-c", _RUN, "run", str(rootfs)]
            + [str(account), process["User"], shutil.which("chroot", path="/usr/sbin:/sbin")]
            + command,
            env=dict(variable.split("=", 1) for variable in env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        coordination = client.CoordinationV1Api(api_client)

        def leading():
            assert proc.poll() is None, log.read_text(errors="replace")
            try:
                lease = coordination.read_namespaced_lease("nodemanager-controller", namespace)
            except client.ApiException as e:
                assert e.status != 404, e
                raise
            return lease.spec.holder_identity

        eventually(leading, timeout=120)
        measured("controller image: start to Lease held", time.monotonic() - started)
        put_configset(api_client, namespace, "one", {"selector": {"matchLabels": {"x": "y"}}})
        eventually(lambda: summarised(api_client, namespace, "one"), timeout=60)

        # it ran as the image's user on a read-only root
        pid = child(proc.pid)
        assert pid is not None
        uids = Path(f"/proc/{pid}/status").read_text().split("\nUid:")[1].split("\n")[0].split()
        assert uids == ["65532"] * 4
        mounts = [line.split() for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()]
        (root,) = [m for m in mounts if m[4] == "/"]
        assert "ro" in root[5].split(","), root
        assert Path(f"/proc/{pid}/exe").resolve().name == "python3.11"

        os.kill(pid, signal.SIGTERM)  # as the kubelet stops a pod
        assert proc.wait(timeout=60) == 0, log.read_text(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
