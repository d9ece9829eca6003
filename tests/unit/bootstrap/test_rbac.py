"""`rbac` prints one node's objects apart from the shared ones, so deleting one deletes one."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from nodemanager.bootstrap.credentials import MAX_TTL_SECONDS, check_ttl
from nodemanager.bootstrap.policy import RESERVED_NAMES, RESERVED_PREFIX
from nodemanager.bootstrap.rbac import manifests, name_problems, shared_manifests
from nodemanager.cli import main


def test_per_node_output_holds_the_guarded_namespace_then_per_node_objects():
    """The Namespace first (kubectl applies and deletes in order), then this node's guard of it,
    then its objects: nothing another node needs but the Namespace, which the guard keeps."""
    namespace, policy, binding, *docs = manifests("b", "ns")
    assert namespace == shared_manifests("ns")[0]  # the same document: no label fights
    assert namespace["metadata"]["labels"]["nodemanager.io/keep"] == "true"
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == "nodemanager-guard-ns.b"
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["operations"] == ["DELETE"] and rule["resourceNames"] == ["ns"]
    assert {d["kind"] for d in docs} == {"ServiceAccount", "Role", "RoleBinding", "Lease"}
    assert all(d["metadata"]["namespace"] == "ns" and "b" in d["metadata"]["name"] for d in docs)


def test_shared_output_holds_the_namespace_and_policies():
    kinds = [d["kind"] for d in shared_manifests("ns")]
    assert kinds[0] == "Namespace"
    assert (
        kinds.count("ValidatingAdmissionPolicy")
        == kinds.count("ValidatingAdmissionPolicyBinding")
        == 6
    )


def test_token_lifetime_is_capped_in_days():
    assert check_ttl(7 * 86400, "--token-ttl") == 7 * 86400
    with pytest.raises(ValueError, match="--token-ttl: at most 30 days"):
        check_ttl(MAX_TTL_SECONDS + 1, "--token-ttl")
    with pytest.raises(ValueError, match="at least 10 minutes"):
        check_ttl(60, "--ttl")


def test_nodes_get_no_secret_or_configmap_the_controller_grants_those():
    rules = [r for d in manifests("b", "ns") if d["kind"] == "Role" for r in d["rules"]]
    assert not [r for r in rules if {"secrets", "configmaps"} & set(r["resources"])]


def test_rbac_output_says_the_controller_is_needed_for_references():
    from click.testing import CliRunner

    from nodemanager.cli import main

    out = CliRunner().invoke(main, ["rbac", "--hostname", "b"]).output
    header = out.split("apiVersion")[0]
    assert "# No Secret or ConfigMap is granted here." in header
    assert "nodemanager rbac --shared" in header  # the policies are not in this output
    assert "nodemanager controller" in out.split("apiVersion")[0]


def test_the_reserved_names_are_the_controllers_own():
    from nodemanager.controller.manager import LEADER_LEASE

    assert LEADER_LEASE in RESERVED_NAMES and LEADER_LEASE.startswith(RESERVED_PREFIX)


@pytest.mark.parametrize("name", RESERVED_NAMES)
def test_rbac_refuses_a_reserved_hostname_in_one_line(name):
    result = CliRunner().invoke(main, ["rbac", "--hostname", name])
    assert result.exit_code == 2 and "reserved" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "groups, because",
    [
        *((name, "reserved") for name in RESERVED_NAMES),
        ("nodemanager-upgrades", "reserved"),
        ("web-1", "own liveness Lease"),
        ("Upgrades", "not a lower-case DNS name"),
    ],
)
def test_rbac_refuses_a_lease_group_that_names_a_projects_or_its_own_lease(groups, because):
    result = CliRunner().invoke(main, ["rbac", "--hostname", "web-1", "--lease-groups", groups])
    assert result.exit_code == 2 and because in result.output


def test_rbac_refuses_a_hostname_that_is_no_object_name():
    assert name_problems("Web_1") == ["hostname 'Web_1' is not a lower-case DNS name"]
    assert name_problems("web-1.example.com", ["upgrades", "db"]) == []


def test_a_node_creates_no_lease_its_output_makes_its_own_and_its_groups():
    docs = manifests("web-1", "ns", lease_groups=["upgrades", "web"])
    made = [d["metadata"]["name"] for d in docs if d["kind"] == "Lease"]
    assert made == ["web-1", "upgrades", "web"]
    assert all("spec" not in d for d in docs if d["kind"] == "Lease")  # the holder writes it
    role = next(d for d in docs if d["kind"] == "Role" and "-node-" in d["metadata"]["name"])
    lease_rules = [r for r in role["rules"] if r["resources"] == ["leases"]]
    assert lease_rules == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["upgrades", "web", "web-1"],
            "verbs": ["get", "update", "patch"],
        }
    ]


def test_upstream_wireguard_grants_get_on_exactly_that_secret():
    result = CliRunner().invoke(
        main, ["rbac", "--hostname", "web-1", "--upstream-wireguard", "wg0,wg1", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    docs = json.loads(result.output)["items"]
    role = next(d for d in docs if d["metadata"]["name"] == "nodemanager-node-web-1")
    secrets = [r for r in role["rules"] if r["resources"] == ["secrets"]]
    assert secrets == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["wg-wg0-web-1", "wg-wg1-web-1"],
            "verbs": ["get"],
        }
    ]
    without = manifests("web-1", "ns")
    role = next(d for d in without if d["metadata"]["name"] == "nodemanager-node-web-1")
    assert not [r for r in role["rules"] if "secrets" in r["resources"]]


def test_certificate_binds_the_nodes_grants_to_its_certificate_user_and_lets_it_ask():
    user = {
        "kind": "User",
        "apiGroup": "rbac.authorization.k8s.io",
        "name": "nodemanager:node:ns:b",
    }
    plain = manifests("b", "ns", drain=True)
    assert not [d for d in plain if user in d.get("subjects", [])]  # opt-in
    assert not [d for d in plain if "nodemanager-csr" in d["metadata"]["name"]]
    docs = manifests("b", "ns", drain=True, certificate=True)
    bound = {d["metadata"]["name"] for d in docs if user in d.get("subjects", [])}
    # Every grant but the token Role: a certificate renews by CSR, not by token.
    assert bound == {"nodemanager-node-b", "nodemanager-drain-ns.b", "nodemanager-csr-ns.b"}
    [csr_role] = [d for d in docs if d["kind"] == "ClusterRole" and "csr" in d["metadata"]["name"]]
    assert csr_role["rules"] == [
        {
            "apiGroups": ["certificates.k8s.io"],
            "resources": ["certificatesigningrequests"],
            "verbs": ["create", "get"],  # no approval, no list
        }
    ]


def test_certificate_lifetimes_are_short():
    from nodemanager.bootstrap.certificate import check_lifetime

    assert check_lifetime(86400, "--cert-ttl") == 86400
    with pytest.raises(ValueError, match="--cert-ttl: at most 168h"):
        check_lifetime(7 * 86400 + 1, "--cert-ttl")
    with pytest.raises(ValueError, match="at least 10 minutes"):
        check_lifetime(599, "--cert-ttl")
    result = CliRunner().invoke(
        main,
        ["bootstrap", "--certificate", "--bootstrap-kubeconfig", __file__, "--cert-ttl", "720h"],
    )
    assert result.exit_code == 2 and "at most 168h" in result.output
    assert "Traceback" not in result.output
