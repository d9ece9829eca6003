"""Node isolation (issue 13) with the agent running on the node's own credential.

`rbac` grants the node no Secret or ConfigMap: the fleet controller (running with the shipped
deploy/controller.yaml permissions) grants by ``resourceNames`` exactly those its ConfigSets
reference. The agent must still apply (it fetches by name), get a newly referenced Secret within
seconds, keep only those objects in its state, keep Secret values out of status and Events,
restore its managed labels, and notice a missing admission policy.
"""

from __future__ import annotations

import base64
import json
import signal
import time
import uuid

import pytest
from kubernetes import client, config

from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import condition, for_host, node, put_configset
from tests.cluster.test_isolation import GROUP, VERSION, credential, kubectl, nm

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
SECRET = "hunter2-Sup3r-s3cret"


def files(host, good, bad, *extra):
    refs = {"secretRefs": [{"name": "db"}], "configMapRefs": [{"name": "cm"}]}
    return for_host(
        host,
        [
            {
                "path": str(good),
                "template": "{{ node.secrets.pw }} {{ node.configmaps.k }}",
                **refs,
            },
            {"path": str(bad), "template": "{{ node.configmaps[node.secrets.pw] }}", **refs},
            *extra,
        ],
    )


@pytest.fixture
def setup(kubeconfig, api_client, tmp_path):
    ns, host = f"iso-{uuid.uuid4().hex[:6]}", "e"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    path = credential(kubeconfig, ns, host, tmp_path)
    controller = ControllerProcess(
        shipped_kubeconfig(kubeconfig, ns, tmp_path), ns, tmp_path, "--sync-period", "1s"
    ).start()
    core = client.CoreV1Api(api_client)
    for name, value in (("db", SECRET), ("unrelated", "other-node-secret"), ("late", "later")):
        core.create_namespaced_secret(
            ns, client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data={"pw": value})
        )
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"k": "v"})
    )
    good, bad = tmp_path / "good.conf", tmp_path / "bad.conf"
    put_configset(api_client, ns, "mine", files(host, good, bad))
    # Another node's ConfigSet references "unrelated": the controller grants it to f only.
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode", "metadata": {"name": "f"}},
    )  # fmt: skip
    put_configset(
        api_client,
        ns,
        "theirs",
        for_host(
            "f",
            [
                {
                    "path": str(tmp_path / "f.conf"),
                    "template": "{{ node.secrets.pw }}",
                    "secretRefs": [{"name": "unrelated"}],
                }
            ],
        ),
    )
    agent = Agent(str(path), ns, host, tmp_path / "state").start()
    yield ns, host, agent, good, bad, tmp_path, path
    agent.stop()
    assert controller.stop() == 0
    restored = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert restored.returncode == 0, restored.stderr


def readable(path, ns, secret) -> bool:
    api = config.new_client_from_config(str(path))
    try:
        client.CoreV1Api(api).read_namespaced_secret(secret, ns)
        return True
    except client.ApiException as e:
        assert e.status == 403, e
        return False
    finally:
        api.close()


def test_agent_reads_only_what_it_references_and_leaks_no_secret(api_client, setup, measured):
    ns, host, agent, good, bad, tmp_path, credential_path = setup
    eventually(lambda: good.exists() and good.read_text() == f"{SECRET} v", timeout=90)
    n = eventually(
        lambda: (
            (m := node(api_client, ns, host))
            and any(
                "bad.conf" in (e.get("error") or "")
                for e in (m.get("status") or {}).get("configsets") or []
            )
            and m
        ),
        timeout=60,
        message="the failing template is reported",
    )
    # "unrelated" is referenced only by f's ConfigSet: e's own credential cannot read it.
    assert readable(credential_path, ns, "db")
    assert not readable(credential_path, ns, "unrelated")

    # A new reference reaches the agent within seconds (the controller grants it by name).
    late = tmp_path / "late.conf"
    extra = {
        "path": str(late),
        "template": "{{ node.secrets.pw }}",
        "secretRefs": [{"name": "late"}],
    }
    added = time.monotonic()
    put_configset(api_client, ns, "mine", files(host, good, bad, extra))
    eventually(
        lambda: late.exists() and late.read_text() == "later", timeout=60, interval=0.2,
        message="newly referenced Secret applied by the agent",
    )  # fmt: skip
    measured(
        "new Secret reference applied by the agent (node credential)", time.monotonic() - added
    )
    # Removed again: revoked for the node.
    removed = time.monotonic()
    put_configset(api_client, ns, "mine", files(host, good, bad))
    eventually(lambda: not readable(credential_path, ns, "late"), timeout=30)
    measured("removed Secret reference revoked (node credential)", time.monotonic() - removed)

    state = tmp_path / "state"
    saved = (state / "last-applied.json").read_text()
    assert SECRET in base64.b64decode(json.loads(saved)["snapshot"]["secrets"]["db"]["pw"]).decode()
    assert "unrelated" not in json.loads(saved)["snapshot"]["secrets"]
    assert "other-node-secret" not in saved
    events = client.CoreV1Api(api_client).list_namespaced_event(ns).items
    for text in (json.dumps(n["status"]), *(e.message or "" for e in events), agent.log()):
        assert SECRET not in text
        assert base64.b64encode(SECRET.encode()).decode() not in text


def test_agent_restores_managed_labels_and_notices_a_missing_policy(kubeconfig, api_client, setup):
    ns, host, agent, *_ = setup
    custom = client.CustomObjectsApi(api_client)
    eventually(
        lambda: condition(node(api_client, ns, host), "NodeRestricted").get("status") == "True",
        timeout=90,
    )
    assert agent.metric("nodemanager_admission_policy_enforced") == 1

    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "managednodes",
        host,
        {"metadata": {"labels": {"kubernetes.io/os": "evil"}}},
    )
    eventually(
        lambda: node(api_client, ns, host)["metadata"]["labels"]["kubernetes.io/os"] != "evil",
        timeout=30,
        message="the agent restores its managed label without a restart",
    )

    admission = client.AdmissionregistrationV1Api(api_client)
    admission.delete_validating_admission_policy_binding("nodemanager-node-restriction")

    def noticed():
        agent.signal(signal.SIGHUP)  # a drift check runs the self-test
        return agent.metric("nodemanager_admission_policy_enforced") == 0

    eventually(noticed, timeout=60, interval=2, message="the self-test notices")
    eventually(
        lambda: (
            condition(node(api_client, ns, host), "NodeRestricted").get("reason") == "PolicyMissing"
        ),
        timeout=30,
    )
    events = client.CoreV1Api(api_client).list_namespaced_event(ns).items
    assert any(e.reason == "AdmissionPolicyMissing" and e.type == "Warning" for e in events)
