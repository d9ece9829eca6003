"""The CRDs on a real kube-apiserver: installed, seed-era YAML accepted, bad input refused by
the API with the field named, status subresource, printer columns and short names."""

import json
import subprocess
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from nodemanager.api import InvalidObject
from nodemanager.api.maxunavailable import problem
from nodemanager.api.pool import NodePool
from tests.unit.api.test_configset import SEED_CHRONY

pytestmark = pytest.mark.cluster
GROUP, VERSION = "common.nodemanager", "v1"


def kubectl(kubeconfig, *args, stdin=None):
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, *args], input=stdin, capture_output=True, text=True
    )


def create_configset(api_client, namespace, spec, name="cs"):
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": name},
        "spec": spec,
    }
    return client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "configsets", body
    )


def test_seed_era_configset_is_accepted_unchanged(api_client, namespace):
    seed = yaml.safe_load(SEED_CHRONY)
    seed["metadata"]["namespace"] = namespace
    created = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "configsets", seed
    )
    spec = created["spec"]
    assert spec["files"][0]["content"] == "server 0.arch.pool.ntp.org iburst\n"
    assert spec["services"][0]["subscribe_files"] == ["/etc/chrony.conf"]
    assert spec["executions"][0] == {
        "command": "/usr/bin/systemctl",
        "args": ["daemon-reload"],
        "subscribe_files": ["/etc/chrony.conf"],
    }
    # Defaults are filled in by the API, the user's fields are untouched.
    assert spec["weight"] == 100 and spec["packages"] == [{"name": "chrony", "ensure": "installed"}]


@pytest.mark.parametrize(
    "file, field, words",
    [
        ({"path": "etc/chrony.conf"}, "spec.files[0].path", "should match '^(/"),
        ({"path": "/etc/../shadow"}, "spec.files[0].path", "must not contain a '..' segment"),
        ({"path": "/x", "ensure": "present"}, "spec.files[0].ensure", "Unsupported value"),
        ({"path": "/x", "mode": "999"}, "spec.files[0].mode", "should match"),
        (
            {"path": "/x", "ensure": "symlink"},
            "spec.files[0].target",
            "target is required when ensure is symlink",
        ),
        (
            {"path": "/x", "content": "a", "template": "b"},
            "spec.files[0].template",
            "mutually exclusive",
        ),
    ],
)
def test_malformed_configset_is_refused_naming_the_field(api_client, namespace, file, field, words):
    with pytest.raises(ApiException) as caught:
        create_configset(api_client, namespace, {"files": [file]})
    assert caught.value.status == 422
    message = json.loads(caught.value.body)["message"]
    assert field in message and words in message, message


def test_bad_package_ensure_and_selector_operator_are_refused(api_client, namespace):
    with pytest.raises(ApiException) as caught:
        create_configset(
            api_client,
            namespace,
            {
                "packages": [{"name": "vim", "ensure": "removed"}],
                "selector": {"matchExpressions": [{"key": "a", "operator": "Has"}]},
            },
        )
    message = json.loads(caught.value.body)["message"]
    assert (
        "spec.packages[0].ensure" in message
        and "spec.selector.matchExpressions[0].operator" in message
    )


@pytest.mark.parametrize("plural", ["configsets", "nodepools"])
def test_in_without_values_is_refused_saying_why(api_client, namespace, plural):
    # The rule reads `values` only when it is there: refused with its message, not CEL's
    # "no such key: values".
    field = "selector" if plural == "configsets" else "nodeSelector"
    kind = "ConfigSet" if plural == "configsets" else "NodePool"
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": f"in-{uuid.uuid4().hex[:6]}"},
        "spec": {field: {"matchExpressions": [{"key": "a", "operator": "In"}]}},
    }
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, body
        )
    message = json.loads(refused.value.body)["message"]
    assert f"spec.{field}.matchExpressions[0]" in message
    assert "values must be non-empty for In" in message and "no such key" not in message


@pytest.mark.parametrize("plural", ["configsets", "nodepools"])
def test_selector_label_keys_and_values_are_validated_as_kubernetes_does(
    api_client, namespace, plural
):
    field = "selector" if plural == "configsets" else "nodeSelector"
    kind = "ConfigSet" if plural == "configsets" else "NodePool"
    api = client.CustomObjectsApi(api_client)

    def create(selector):
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": kind,
            "metadata": {"name": f"sel-{uuid.uuid4().hex[:6]}"},
            "spec": {field: selector},
        }
        return api.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, body)

    def expression(key, *values):
        if not values:
            return {"matchExpressions": [{"key": key, "operator": "Exists"}]}
        return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}

    good = {"matchLabels": {"app.kubernetes.io/name": "web-1", "empty": ""}}
    good |= expression("x/y_z", "a.b", "C")
    create(good)
    NodePool.from_dict({"metadata": {"name": "p"}, "spec": {"nodeSelector": good}})
    path = f"spec.{field}"
    for selector, says in (
        ({"matchLabels": {"bad key": "x"}}, f"{path}.matchLabels: Invalid value"),
        ({"matchLabels": {"a/b/c": "x"}}, f"{path}.matchLabels: Invalid value"),
        ({"matchLabels": {"role": "web server"}}, f"{path}.matchLabels.role"),
        ({"matchLabels": {"role": "a" * 64}}, f"{path}.matchLabels.role"),
        (expression("-a"), f"{path}.matchExpressions[0].key"),
        (expression("role", "ok", "\u00b2"), f"{path}.matchExpressions[0].values[1]"),
    ):
        with pytest.raises(InvalidObject):  # the parser agrees (api/labels.py)
            NodePool.from_dict({"metadata": {"name": "p"}, "spec": {"nodeSelector": selector}})
        with pytest.raises(ApiException) as refused:
            create(selector)
        body = refused.value.body
        assert refused.value.status == 422 and says in body, body


def test_managednode_status_subresource(api_client, namespace):
    api = client.CustomObjectsApi(api_client)
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ManagedNode",
            "metadata": {"name": "host1", "labels": {"nodemanager.io/os": "arch"}},
            "spec": {"domain": "example.org"},
        },
    )
    patched = api.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        "host1",
        {
            "spec": {"domain": "evil.example"},
            "status": {
                "release": "Arch Linux",
                "agentVersion": "0.1.0",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Applied",
                        "message": "",
                        "lastTransitionTime": "2026-11-22T00:00:00Z",
                    }
                ],
            },
        },
    )
    assert patched["status"]["release"] == "Arch Linux"
    assert patched["spec"]["domain"] == "example.org"  # spec cannot change through /status
    node = api.get_namespaced_custom_object(GROUP, VERSION, namespace, "managednodes", "host1")
    assert node["status"]["conditions"][0]["type"] == "Ready"


def test_printer_columns_and_short_names(kubeconfig, api_client, namespace):
    api = client.CustomObjectsApi(api_client)
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ManagedNode",
            "metadata": {"name": "web1", "labels": {"nodemanager.io/os": "alpine"}},
        },
    )
    api.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        "web1",
        {
            "status": {
                "release": "Alpine Linux v3.20",
                "agentVersion": "0.1.0",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Applied",
                        "message": "",
                        "lastTransitionTime": "2026-11-22T00:00:00Z",
                    }
                ],
            }
        },
    )
    create_configset(api_client, namespace, {"weight": 7}, name="weighted")

    nodes = kubectl(kubeconfig, "-n", namespace, "get", "mn")
    assert nodes.returncode == 0, nodes.stderr
    header, row = nodes.stdout.splitlines()[:2]
    assert header.split()[:5] == ["NAME", "OS", "RELEASE", "READY", "AGENT"]
    assert row.split()[:2] == ["web1", "alpine"] and "True" in row and "0.1.0" in row
    sets = kubectl(kubeconfig, "-n", namespace, "get", "cset")
    assert sets.returncode == 0, sets.stderr
    assert sets.stdout.splitlines()[0].split() == [
        "NAME", "MATCHED", "UPDATED", "FAILED", "UPDATING", "UNAVAILABLE", "PAUSED", "REVISION",
        "AGE",
    ]  # fmt: skip
    assert sets.stdout.splitlines()[1].split()[0] == "weighted"
    wide = kubectl(kubeconfig, "-n", namespace, "get", "cset", "-o", "wide")
    header, row = wide.stdout.splitlines()[:2]
    assert row[header.index("WEIGHT") :].split()[0] == "7", wide.stdout


def test_kubectl_explain_has_field_descriptions(kubeconfig):
    explained = kubectl(kubeconfig, "explain", "configsets.spec.files.mode")
    assert explained.returncode == 0, explained.stderr
    assert "octal string" in explained.stdout


def test_upstreams_zero_durations_and_status_fields_are_accepted_and_kept(api_client, namespace):
    """Upstream's "zero means event-driven" and its status fields (managednode_types.go)."""
    api = client.CustomObjectsApi(api_client)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ManagedNode",
        "metadata": {"name": "zero"},
        "spec": {
            "reconcilePeriod": "0",
            "upgrade": {"schedule": "0 3 * * *", "delay": "0", "group": "g"},
        },
    }
    api.create_namespaced_custom_object(GROUP, VERSION, namespace, "managednodes", body)
    sha = "a" * 64
    status = {
        "fileBackups": {"/etc/chrony.conf": sha},
        "lastFileBucketGC": "2026-11-01T00:00:00Z",
        "jailed": True,
        "release": "6.6.1-arch1-1",
    }
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "managednodes", "zero", {"status": status}
    )
    stored = api.get_namespaced_custom_object(GROUP, VERSION, namespace, "managednodes", "zero")
    assert stored["spec"]["reconcilePeriod"] == "0" and stored["spec"]["upgrade"]["delay"] == "0"
    assert {k: stored["status"].get(k) for k in status} == status  # nothing pruned
    with pytest.raises(ApiException) as refused:
        api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "managednodes",
            "zero",
            {"status": {"fileBackups": {"/etc/a\u2028b": sha}}},
        )
    assert "no control characters" in refused.value.body


def test_nodepool_max_unavailable_is_validated_and_columns_print(kubeconfig, api_client, namespace):
    api = client.CustomObjectsApi(api_client)

    def pool(name, spec):
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodePool", "metadata": {"name": name}}
        return api.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "nodepools", {**body, "spec": spec}
        )

    # One rule with api/maxunavailable.py: 0 in no form, percentages up to 100, ASCII digits.
    refused_as = {0: "must be at least 1", -2: "must be at least 1"}
    refused_as |= {v: "should match" for v in ("lots", "0", "0%", "150%", "\u00b2", "5\n")}
    for bad, says in refused_as.items():
        assert problem(bad) is not None
        with pytest.raises(ApiException) as refused:
            pool(f"bad-{uuid.uuid4().hex[:4]}", {"maxUnavailable": bad})
        body = refused.value.body
        assert refused.value.status == 422 and "spec.maxUnavailable" in body and says in body
        with pytest.raises(ApiException) as refused:
            create_configset(api_client, namespace, {"rollout": {"maxUnavailable": bad}}, "bad")
        body = refused.value.body
        assert refused.value.status == 422 and "spec.rollout.maxUnavailable" in body, body
        assert says in body, body
    for good in ("5", "100%"):
        assert problem(good) is None
        pool(f"ok-{good[:-1] if good.endswith('%') else good}", {"maxUnavailable": good})
    created = pool(
        "web", {"nodeSelector": {"matchLabels": {"role": "web"}}, "maxUnavailable": "25%"}
    )
    assert created["spec"]["progressDeadlineSeconds"] == 600  # the schema's default
    assert pool("defaulted", {})["spec"]["maxUnavailable"] == 1
    shown = kubectl(kubeconfig, "-n", namespace, "get", "np", "-o", "wide")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].split() == [
        "NAME", "NODES", "READY", "UPDATED", "UPDATING", "UNAVAILABLE", "DEGRADED",
        "MAXUNAVAILABLE", "PAUSED", "STAGEALL", "AGE",
    ]  # fmt: skip
