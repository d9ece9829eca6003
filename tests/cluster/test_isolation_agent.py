"""Node isolation (issue 13) with the agent running on the node's own credential.

The node's Role is narrowed to what the fleet controller will grant: its referenced Secret and
ConfigMap by ``resourceNames``, nothing namespace-wide. The agent must still apply (it fetches
by name), keep only those objects in its state, keep Secret values out of status and Events,
restore its managed labels, and notice a missing admission policy.
"""

from __future__ import annotations

import base64
import json
import signal
import uuid

import pytest
from kubernetes import client

from tests.cluster.agent import Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import condition, for_host, node, put_configset
from tests.cluster.test_isolation import GROUP, VERSION, credential, kubectl, nm

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
SECRET = "hunter2-Sup3r-s3cret"


@pytest.fixture
def setup(kubeconfig, api_client, tmp_path):
    ns, host = f"iso-{uuid.uuid4().hex[:6]}", "e"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    path = credential(kubeconfig, ns, host, tmp_path)
    rbac = client.RbacAuthorizationV1Api(api_client)
    role = rbac.read_namespaced_role(f"nodemanager-node-{host}", ns)
    by_name = [r for r in role.rules if "secrets" not in (r.resources or [])]
    by_name.append(
        client.V1PolicyRule(
            api_groups=[""],
            resources=["secrets", "configmaps"],
            resource_names=["db", "cm"],
            verbs=["get", "list", "watch"],
        )
    )
    role.rules = by_name
    rbac.replace_namespaced_role(role.metadata.name, ns, role)
    core = client.CoreV1Api(api_client)
    for name, value in (("db", SECRET), ("unrelated", "other-node-secret")):
        core.create_namespaced_secret(
            ns, client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data={"pw": value})
        )
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"k": "v"})
    )
    good, bad = tmp_path / "good.conf", tmp_path / "bad.conf"
    refs = {"secretRefs": [{"name": "db"}], "configMapRefs": [{"name": "cm"}]}
    put_configset(
        api_client,
        ns,
        "mine",
        for_host(
            host,
            [
                {
                    "path": str(good),
                    "template": "{{ node.secrets.pw }} {{ node.configmaps.k }}",
                    **refs,
                },
                {"path": str(bad), "template": "{{ node.configmaps[node.secrets.pw] }}", **refs},
                {
                    "path": str(tmp_path / "forbidden.conf"),
                    "template": "{{ node.secrets.pw }}",
                    "secretRefs": [{"name": "unrelated"}],  # not in the node's Role
                },
            ],
        ),
    )
    agent = Agent(str(path), ns, host, tmp_path / "state").start()
    yield ns, host, agent, good, tmp_path / "state"
    agent.stop()
    restored = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert restored.returncode == 0, restored.stderr


def test_agent_reads_only_what_it_references_and_leaks_no_secret(api_client, setup):
    ns, host, agent, good, state = setup
    eventually(lambda: good.exists() and good.read_text() == f"{SECRET} v", timeout=90)
    n = eventually(
        lambda: (
            (m := node(api_client, ns, host))
            and any(
                "bad.conf" in (e.get("error") or "")
                and "Secret 'unrelated' not found" in (e.get("error") or "")
                for e in (m.get("status") or {}).get("configsets") or []
            )
            and m
        ),
        timeout=60,
        message="the failing template is reported",
    )
    saved = (state / "last-applied.json").read_text()
    assert SECRET in base64.b64decode(json.loads(saved)["snapshot"]["secrets"]["db"]["pw"]).decode()
    assert "unrelated" not in json.loads(saved)["snapshot"]["secrets"]
    assert "other-node-secret" not in saved
    events = client.CoreV1Api(api_client).list_namespaced_event(ns).items
    for text in (json.dumps(n["status"]), *(e.message or "" for e in events), agent.log()):
        assert SECRET not in text
        assert base64.b64encode(SECRET.encode()).decode() not in text


def test_agent_restores_managed_labels_and_notices_a_missing_policy(kubeconfig, api_client, setup):
    ns, host, agent, good, _ = setup
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
        {"metadata": {"labels": {"nodemanager.io/os": "evil"}}},
    )
    eventually(
        lambda: node(api_client, ns, host)["metadata"]["labels"]["nodemanager.io/os"] != "evil",
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
