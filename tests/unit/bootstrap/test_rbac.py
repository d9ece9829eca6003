"""`rbac` prints one node's objects apart from the shared ones, so deleting one deletes one."""

from __future__ import annotations

import pytest

from nodemanager.bootstrap.credentials import MAX_TTL_SECONDS, check_ttl
from nodemanager.bootstrap.rbac import manifests, shared_manifests


def test_per_node_output_holds_only_per_node_objects():
    docs = manifests("b", "ns")
    assert {d["kind"] for d in docs} == {"ServiceAccount", "Role", "RoleBinding"}
    assert all(d["metadata"]["namespace"] == "ns" and "b" in d["metadata"]["name"] for d in docs)


def test_shared_output_holds_the_namespace_and_policies():
    kinds = [d["kind"] for d in shared_manifests("ns")]
    assert kinds[0] == "Namespace"
    assert (
        kinds.count("ValidatingAdmissionPolicy")
        == kinds.count("ValidatingAdmissionPolicyBinding")
        == 4
    )


def test_token_lifetime_is_capped_in_days():
    assert check_ttl(7 * 86400, "--token-ttl") == 7 * 86400
    with pytest.raises(ValueError, match="--token-ttl: at most 30 days"):
        check_ttl(MAX_TTL_SECONDS + 1, "--token-ttl")
    with pytest.raises(ValueError, match="at least 10 minutes"):
        check_ttl(60, "--ttl")
