"""The command line against the real API server: options before the subcommand reach it,
$KUBECONFIG's files are merged, `rollout status` never exits 0 on an unfinished rollout, the
seed's one-line onboarding works on a fresh namespace and deleting one host's output keeps the
others, and the agent with its server away logs single lines, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.cluster.agent import NODEMANAGER
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION
from tests.cluster.test_isolation import credential, kubectl, nm, works
from tests.unit.cli.test_errors import kubeconfig as unreachable_kubeconfig

pytestmark = pytest.mark.cluster


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODEMANAGER, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def set_progress(api, ns, name, *, matched, updated, paused=False, conditions=()):
    """The status the controller writes for a rollout (controller/rollout.py `progress` reads
    it), written here so each state is exact."""
    custom = client.CustomObjectsApi(api)
    cs = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "configsets", name)
    conditions = [{"type": "Paused", "status": "True", "reason": "Paused", "message": "",
                   "lastTransitionTime": "2026-11-25T00:00:00Z"}] if paused else [
        {**c, "lastTransitionTime": "2026-11-25T00:00:00Z"} for c in conditions
    ]  # fmt: skip
    cs["status"] = {
        "observedGeneration": cs["metadata"]["generation"],
        "matched": matched,
        "updated": updated,
        "conditions": conditions,
    }
    custom.replace_namespaced_custom_object_status(GROUP, VERSION, ns, "configsets", name, cs)


def test_rollout_status_exit_codes_with_options_before_the_subcommand(
    api_client, kubeconfig, namespace, tmp_path
):
    name = "staged"
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "configsets",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ConfigSet",
            "metadata": {"name": name},
            "spec": {"rollout": {"maxUnavailable": 1}, "files": [{"path": "/x", "content": ""}]},
        },
    )
    # $KUBECONFIG: a first file whose current context is a dead server, then the real one;
    # --context picks the real one's context from the merged files.
    real_context = yaml.safe_load(Path(kubeconfig).read_text())["current-context"]
    dead = unreachable_kubeconfig(tmp_path / "dead.yaml", 1)
    env = {"KUBECONFIG": os.pathsep.join([str(dead), kubeconfig])}
    status = ["--context", real_context, "-n", namespace, "rollout", "status", f"configset/{name}"]

    set_progress(api_client, namespace, name, matched=2, updated=1, paused=True)
    paused = run(*status, env=env)
    assert paused.returncode == 3, paused
    assert "is paused (1 of 2 nodes updated)" in paused.stdout
    assert f"nodemanager rollout resume configset/{name}" in paused.stderr

    set_progress(api_client, namespace, name, matched=2, updated=1)
    unfinished = run(*status, "--watch=false", env=env)
    assert unfinished.returncode == 4 and "1 of 2 updated" in unfinished.stdout, unfinished

    # Past progressDeadlineSeconds, and halted by a failure: exit 1 and one line naming why,
    # as `kubectl rollout status` does ("exceeded its progress deadline"), also while waiting.
    deadline = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                "message": "no node updated for 5s; waiting for n2 (not ready)"}  # fmt: skip
    halted = {"type": "Degraded", "status": "True", "reason": "ApplyFailed",
              "message": "failed on n1"}  # fmt: skip
    for condition, why in (
        (deadline, "exceeded its progress deadline: no node updated for 5s; waiting for n2"),
        (halted, "rollout failed: failed on n1"),
    ):
        set_progress(api_client, namespace, name, matched=2, updated=1, conditions=[condition])
        failed = run(*status, env=env)
        assert failed.returncode == 1, failed
        assert failed.stderr.startswith(f'error: configset "{name}" ') and why in failed.stderr
        assert failed.stderr.count("\n") == 1 and "Traceback" not in failed.stderr, failed

    set_progress(api_client, namespace, name, matched=2, updated=2)
    done = run(*status, env=env)
    assert done.returncode == 0 and "successfully rolled out" in done.stdout, done

    # Without --context the merged files' first current-context (the dead server) is used.
    away = run("-n", namespace, "rollout", "status", f"configset/{name}", env=env)
    assert away.returncode == 1 and "unreachable: https://127.0.0.1:1" in away.stderr, away
    assert away.stderr.count("\n") == 1 and "Traceback" not in away.stderr


@pytest.mark.parametrize("command", ["status", "history", "pause", "resume", "undo"])
def test_rollout_of_a_configset_that_is_not_there_fails_in_one_line(kubeconfig, namespace, command):
    missing = run("--kubeconfig", kubeconfig, "-n", namespace, "rollout", command, "configset/nx")
    assert missing.returncode == 1, missing
    assert missing.stderr.splitlines() == [
        'Error: 404 configsets.common.nodemanager "nx" not found; check -n/--namespace and '
        "that the CRDs are installed (`make install`)"
    ]
    assert missing.stdout == ""


def locked_out(path: Path, ns: str) -> bool:
    """The credential is refused: 401 once its account is gone, 403 while only its RBAC is."""
    try:
        return not works(path, ns)
    except client.ApiException as e:
        return e.status == 403


def test_seed_onboarding_line_on_a_fresh_namespace_and_deleting_one_host(kubeconfig, tmp_path):
    """`nodemanager rbac --hostname H | kubectl apply -f -` with nothing applied before (no
    `rbac --shared`): two hosts admitted; deleting one host's output removes that host, keeps
    the Namespace, and the other host still works."""
    ns = f"fresh-{uuid.uuid4().hex[:6]}"
    a_path = credential(kubeconfig, ns, "a", tmp_path)
    b_path = credential(kubeconfig, ns, "b", tmp_path)
    assert works(a_path, ns) and works(b_path, ns)
    a_output = nm("rbac", "--hostname", "a", "--namespace", ns).stdout
    deleted = kubectl(kubeconfig, "delete", a_output)
    assert deleted.returncode == 1 and f"kubectl label namespace {ns} nodemanager.io/keep-" in (
        deleted.stderr
    ), deleted
    assert 'serviceaccount "nodemanager-a" deleted' in deleted.stdout
    eventually(lambda: locked_out(a_path, ns), timeout=30, message="a's access is gone")
    assert works(b_path, ns)  # b still works: the Namespace and its objects stay
    b_output = nm("rbac", "--hostname", "b", "--namespace", ns).stdout
    again = kubectl(kubeconfig, "apply", b_output)  # re-applying is a no-op, not a fight
    assert again.returncode == 0 and "namespace/" + ns + " unchanged" in again.stdout, again
    # Deleting the Namespace on purpose: remove the label, as the refusal says.
    kubectl(kubeconfig, "delete", b_output)
    unlabel = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "label", "namespace", ns, "nodemanager.io/keep-"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert unlabel.returncode == 0, unlabel.stderr
    gone = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "delete", "namespace", ns, "--wait=false"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert gone.returncode == 0, gone.stderr


def test_agent_with_its_server_away_logs_lines_not_tracebacks(tmp_path):
    dead = unreachable_kubeconfig(tmp_path / "dead.yaml", 1)
    log = tmp_path / "agent.log"
    with open(log, "w") as out:
        agent = subprocess.Popen(
            [NODEMANAGER, "run", "--kubeconfig", str(dead), "--hostname", "away",
             "--state-dir", str(tmp_path / "state"), "--metrics-bind-address", "0",
             "--health-probe-bind-address", "0", "--log-format", "text"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        eventually(
            lambda: "cannot register ManagedNode" in log.read_text(),
            timeout=60,
            message="the agent says it cannot reach the server",
        )
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=60)
    text = log.read_text()
    assert "Traceback" not in text, text
    assert all(line[:4].isdigit() for line in text.splitlines()), text  # each a log line
