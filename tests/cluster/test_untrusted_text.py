"""A ConfigSet author's text is interpreted under limits, and health means enforcing (issue 37).

Templates that break Jinja's recursive parser (70 nested parentheses: 147 bytes) used to raise
RecursionError in the agent itself, outside the render child: every reconcile of every node
they reached stopped, and the nodes kept saying Ready. Now each is its own file's error, and a
reconcile that cannot complete says so (Ready=False, /readyz, /healthz, a metric).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.cluster.agent import NODEMANAGER, Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import applied, condition, entry, for_host, node, put_configset

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]

# Each raised RecursionError in Jinja's parser (issue 37's figures).
PARENS = "{{ " + "(" * 70 + "1" + ")" * 70 + " }}"
IFS = "{% if true %}" * 244 + "x" + "{% endif %}" * 244
SUM = "{{ " + "+".join(["1"] * 990) + " }}"
FORS = "{% for i in [1] %}" * 241 + "x" + "{% endfor %}" * 241


@pytest.fixture
def host():
    return f"host-{uuid.uuid4().hex[:6]}"


def entry_applied(api_client, namespace, host, name, rv=None):
    """``name``'s entry without an error (at ``rv``): other ConfigSets fail beside it, so the
    node-wide Applied condition is False and test_daemon's ``applied`` would never hold."""

    def check():
        e = entry(node(api_client, namespace, host), name)
        assert e is not None and e["error"] == "", e
        assert rv is None or e["resourceVersion"] == rv, e
        return e

    return eventually(check, timeout=90, message=f"{name} applied on {host}")


def rss_mb(agent: Agent) -> float:
    for line in Path(f"/proc/{agent.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_parser_breaking_templates_are_their_files_errors_beside_a_plain_configset(
    kubeconfig, api_client, namespace, host, tmp_path
):
    assert len(PARENS) == 147
    plain = tmp_path / "plain"
    put_configset(
        api_client, namespace, "plain", for_host(host, [{"path": str(plain), "content": "1"}])
    )
    bad = [
        {"path": str(tmp_path / name), "template": text}
        for name, text in (("parens", PARENS), ("ifs", IFS), ("sum", SUM), ("fors", FORS))
    ]
    put_configset(api_client, namespace, "bad", for_host(host, bad))
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        entry_applied(api_client, namespace, host, "plain")
        assert plain.read_text() == "1"

        def reported():
            n = node(api_client, namespace, host)
            error = (entry(n, "bad") or {}).get("error", "")
            for i in range(len(bad)):
                assert f"spec.files[{i}].template" in error, error
            assert "RecursionError" in error or "recursion" in error, error
            assert condition(n, "Ready")["status"] == "False"
            assert condition(n, "Ready")["reason"] == "ApplyFailed"
            return error

        eventually(reported, timeout=60, message="bad's files reported in its entry")
        for f in bad:
            assert not (tmp_path / f["path"]).exists()
        # The plain ConfigSet keeps applying: a change lands within one pass.
        started = time.monotonic()
        cs = put_configset(
            api_client, namespace, "plain", for_host(host, [{"path": str(plain), "content": "2"}])
        )
        entry_applied(api_client, namespace, host, "plain", cs["metadata"]["resourceVersion"])
        took = time.monotonic() - started
        assert plain.read_text() == "2"
        assert took < 30, f"an unrelated change took {took:.1f} s"
        # Drift is corrected too (a full pass with SIGHUP).
        plain.unlink()
        agent.signal(1)
        eventually(plain.exists, timeout=60, message="drift corrected beside the bad ConfigSet")
        assert agent.get("/healthz", agent.health_port) == 200  # enforcing: healthy
        assert rss_mb(agent) < 150, f"agent RSS {rss_mb(agent):.0f} MB"
        assert "reconcile failed" not in agent.log()  # no pass raised
    finally:
        agent.stop()
    print(f"\nunrelated change beside 4 parser-breaking templates: {took:.1f} s")


def test_a_reconcile_that_cannot_complete_is_not_ready_with_the_reason(
    kubeconfig, api_client, namespace, host, tmp_path
):
    """The state dir stops taking writes (a full or read-only disk): each reconcile raises.
    The node says so within a bounded time, and comes back when the cause is gone."""
    target, state = tmp_path / "f", tmp_path / "state"
    put_configset(
        api_client, namespace, "c", for_host(host, [{"path": str(target), "content": "1"}])
    )
    agent = Agent(kubeconfig, namespace, host, state, "--reconcile-failing-timeout", "5s").start()
    try:
        applied(api_client, namespace, host, "c")
        assert condition(node(api_client, namespace, host), "Ready")["status"] == "True"
        # last-applied.json becomes a directory that is not empty: its atomic rename fails.
        stored = state / "last-applied.json"
        stored.unlink()
        stored.mkdir()
        (stored / "in-the-way").write_text("")
        put_configset(
            api_client, namespace, "c", for_host(host, [{"path": str(target), "content": "2"}])
        )
        started = time.monotonic()

        def not_ready():
            ready = condition(node(api_client, namespace, host), "Ready")
            assert ready.get("status") == "False", ready
            assert ready.get("reason") == "ReconcileError", ready
            assert "IsADirectoryError" in ready["message"] or "Errno" in ready["message"], ready
            return ready

        ready = eventually(not_ready, timeout=60, message="Ready=False, reason ReconcileError")
        print(f"\nnot Ready after {time.monotonic() - started:.1f} s: {ready['message']}")
        assert condition(node(api_client, namespace, host), "Degraded")["status"] == "True"
        assert agent.get("/readyz", agent.health_port) == 503
        assert agent.metric("nodemanager_reconcile_total", 'outcome="error"') >= 1
        eventually(
            lambda: agent.get("/healthz", agent.health_port) == 500,
            timeout=60,
            message="/healthz fails once reconciles have not completed for 5 s",
        )
        shutil.rmtree(stored)
        put_configset(
            api_client, namespace, "c", for_host(host, [{"path": str(target), "content": "3"}])
        )
        eventually(
            lambda: condition(node(api_client, namespace, host), "Ready").get("status") == "True",
            timeout=60,
            message="Ready again once reconciles complete",
        )
        assert agent.get("/healthz", agent.health_port) == 200
        assert target.read_text() == "3"
    finally:
        agent.stop()


def test_three_large_templates_do_not_hold_an_unrelated_change(
    kubeconfig, api_client, namespace, host, tmp_path
):
    """Three ConfigSets with a 1.2 MB template each held an unrelated change 100 s, parsed in
    the agent outside every limit (58 to 95 MB). Now only the render child parses them."""
    big = "{{ node.name }}" + "{{ 1 }}" * (1_200_000 // 7)
    for i in range(3):
        put_configset(
            api_client, namespace, f"big-{i}",
            for_host(host, [{"path": str(tmp_path / f"big-{i}"), "template": big}]),
        )  # fmt: skip
    plain = tmp_path / "plain"
    put_configset(
        api_client, namespace, "plain", for_host(host, [{"path": str(plain), "content": "1"}])
    )
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        entry_applied(api_client, namespace, host, "plain")
        started = time.monotonic()
        cs = put_configset(
            api_client, namespace, "plain", for_host(host, [{"path": str(plain), "content": "2"}])
        )
        entry_applied(api_client, namespace, host, "plain", cs["metadata"]["resourceVersion"])
        took = time.monotonic() - started
        passes = [line for line in agent.log().splitlines() if "reconciled in" in line]
        print("\n" + "\n".join(passes[-8:]))
        assert took < 45, f"an unrelated change took {took:.1f} s beside three 1.2 MB templates"
        assert rss_mb(agent) < 150, f"agent RSS {rss_mb(agent):.0f} MB"
    finally:
        agent.stop()
    print(f"\nunrelated change beside three 1.2 MB templates: {took:.1f} s")


def test_a_secret_fed_file_made_absent_leaves_no_digest_in_file_backups(
    kubeconfig, api_client, namespace, host, tmp_path
):
    """Issue 37: the plan that removes a Secret-fed file no longer says Secret-fed, and its
    backup's digest (a digest of the Secret's content) reached status.fileBackups."""
    import hashlib
    import json

    from tests.cluster.test_templates import put_secret

    token = f"token-{uuid.uuid4().hex}"
    put_secret(api_client, namespace, f"{host}-s", {"token": token})
    target = tmp_path / "token.conf"
    fed = {"path": str(target), "template": "{{ node.secrets.token }}\n",
           "secretRefs": [{"name": f"{host}-s"}]}  # fmt: skip
    put_configset(api_client, namespace, "fed", for_host(host, [fed]))
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        applied(api_client, namespace, host, "fed")
        assert target.read_text() == f"{token}\n"
        digest = hashlib.sha256(f"{token}\n".encode()).hexdigest()
        cs = put_configset(
            api_client,
            namespace,
            "fed",
            for_host(host, [{"path": str(target), "ensure": "absent"}]),
        )
        n = applied(api_client, namespace, host, "fed", cs["metadata"]["resourceVersion"])
        assert not target.exists()
        assert str(target) not in ((n.get("status") or {}).get("fileBackups") or {})
        assert digest not in json.dumps(n) and token not in json.dumps(n)
        restored = subprocess.run(
            [NODEMANAGER, "restore", str(target), "--list", "--state-dir", str(tmp_path / "state")],
            capture_output=True, text=True,
        )  # fmt: skip
        assert restored.returncode == 0 and digest[:12] in restored.stdout  # kept on disk
    finally:
        agent.stop()
