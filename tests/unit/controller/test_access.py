"""Per-node Roles: exactly the referenced names, and never an empty resourceNames rule."""

from __future__ import annotations

from nodemanager.api import ConfigSet
from nodemanager.controller.access import (
    binding,
    normalised,
    references,
    role,
    rules,
    same_subjects,
    subjects,
    trusted,
)


def cs(name, role_, secrets=(), configmaps=()):
    return ConfigSet.from_dict(
        {
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": {"role": role_}},
                "files": [
                    {
                        "path": f"/etc/{name}",
                        "template": "x",
                        "secretRefs": [{"name": s} for s in secrets],
                        "configMapRefs": [{"name": c} for c in configmaps],
                    }
                ],
            },
        }
    )


def test_references_come_only_from_selecting_configsets():
    sets = [
        cs("a", "web", secrets=["tls", "db"]),
        cs("b", "db", secrets=["db-root"], configmaps=["m"]),
    ]
    assert references(sets, {"role": "web"}) == (["db", "tls"], [])
    assert references(sets, {"role": "db"}) == (["db-root"], ["m"])
    assert references(sets, {"role": "other"}) == ([], [])


def test_no_reference_means_no_rule_not_an_empty_resource_names():
    assert rules([], []) == []
    got = rules(["tls"], [])
    assert got == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["tls"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    assert normalised(got) == got


def test_role_and_binding_name_the_node_and_its_service_account():
    node = {"metadata": {"name": "h1", "uid": "u-1"}}
    r, b = role(node, "ns", rules(["tls"], [])), binding(node, "ns")
    assert r["metadata"]["name"] == b["roleRef"]["name"] == "nodemanager-refs-h1"
    assert r["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert b["subjects"] == [
        {"kind": "ServiceAccount", "name": "nodemanager-h1", "namespace": "ns"}
    ]


def test_only_labels_a_node_cannot_set_decide_grants():
    labels = {
        "kubernetes.io/hostname": "a",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "nodemanager.io/os": "arch",
        "agent.nodemanager.io/x": "y",
        "role": "db",
    }
    assert trusted(labels) == {"kubernetes.io/hostname": "a", "role": "db"}


def test_the_certificate_user_reads_references_only_while_rbacs_binding_names_it():
    sa = {"kind": "ServiceAccount", "name": "nodemanager-h", "namespace": "ns"}
    user = {
        "kind": "User",
        "apiGroup": "rbac.authorization.k8s.io",
        "name": "nodemanager:node:ns:h",
    }
    assert subjects("h", "ns", None) == [sa]  # token-only node, or `rbac` not applied
    assert subjects("h", "ns", {"subjects": [sa]}) == [sa]  # revoked: no user there
    assert subjects("h", "ns", {"subjects": [sa, user]}) == [sa, user]  # rbac --certificate
    # Another node's or another namespace's certificate named there grants nothing here.
    other = {**user, "name": "nodemanager:node:other:h"}
    assert subjects("h", "ns", {"subjects": [sa, other]}) == [sa]
    assert same_subjects({"subjects": [user, sa]}, [sa, user])
    assert not same_subjects({"subjects": [sa, user]}, [sa])
