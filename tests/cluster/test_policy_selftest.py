"""The agent's policy self-test covers every policy `rbac --shared` prints (issue 27 item 8).

It noticed a deleted binding of the node-restriction policy but not of the events, leases and
tokens policies. Here, with a node's own credential on the real API server, each binding is
deleted in turn: the self-test names exactly that policy, and none once it is back. Its probes
are dry-runs: nothing is stored and no token is issued.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.policycheck import PROBES, missing_policies
from tests.cluster.helpers import eventually
from tests.cluster.test_isolation import cluster, kubectl, nm  # noqa: F401

pytestmark = pytest.mark.cluster


def test_every_shared_policy_has_a_probe():
    shared = nm("rbac", "--shared", "-o", "json")
    assert shared.returncode == 0, shared.stderr
    names = {
        d["metadata"]["name"]
        for d in json.loads(shared.stdout)["items"]
        if d["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    # these guard grants only `rbac --drain` (cordon) and `rbac --certificate` (CSRs) give:
    # without them RBAC refuses, so a node without the flag has nothing to probe
    assert names - set(PROBES) == {"nodemanager-node-cordon", "nodemanager-node-csrs"}


@pytest.mark.parametrize("policy", PROBES)
def test_the_self_test_names_a_policy_whose_binding_is_gone(cluster, policy):  # noqa: F811
    node = ClientFactory(str(cluster.a_path))
    check = lambda: missing_policies(node, cluster.ns, "a")  # noqa: E731
    assert eventually(lambda: check() == [], timeout=30)
    admission = client.AdmissionregistrationV1Api(cluster.admin)
    admission.delete_validating_admission_policy_binding(policy)
    try:
        eventually(lambda: check() == [policy], timeout=30, message=f"{policy} noticed")
    finally:
        shared = nm("rbac", "--shared", "--namespace", cluster.ns)
        assert kubectl(cluster.kubeconfig, "apply", shared.stdout).returncode == 0
    eventually(lambda: check() == [], timeout=30, message=f"{policy} back")
    leases = client.CoordinationV1Api(cluster.admin).list_namespaced_lease(cluster.ns).items
    assert "nodemanager-policy-self-test" not in {lease.metadata.name for lease in leases}
