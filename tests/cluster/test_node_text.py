"""One rule for node-written text (issue 27 item 1), each lock tried alone on the real API server.

Unicode's line breaks beyond ASCII (U+0085, U+2028, U+2029) passed the CRD, the admission policy
and the agents' peer check, so a node's ``status.release`` became extra lines in another node's
YAML. The CRD schema is tried with an administrator's credential (the policy does not apply to
it); the policy with a node's own credential while the CRD's status patterns are relaxed, as on
a cluster whose CRD is older; the peer check is tests/unit/api/test_nodestatus.py.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_controller_access import can_read, create_secrets, secret_file
from tests.cluster.test_daemon import put_configset
from tests.cluster.test_isolation import GROUP, VERSION, cluster, refused  # noqa: F401

pytestmark = pytest.mark.cluster
CRD = Path(__file__).resolve().parents[2] / "crds" / "managednodes.yaml"
RELAXED = ("pattern", "maxLength", "maxItems", "x-kubernetes-validations")

BAD_TEXT = {
    "U+2028 in the release": {"release": "Arch\u2028admin: true"},
    "U+2029 in the release": {"release": "Arch\u2029admin: true"},
    "U+0085 in the release": {"release": "Arch\u0085admin: true"},
    "U+2028 in the OS name": {"osPrettyName": "Arch\u2028admin: true"},
    "U+2028 in a ConfigSet error": {"configsets": [{"name": "x", "error": "a\u2028b"}]},
    "U+0085 in a conflict": {"configsets": [{"name": "x", "conflicts": ["file:/a\u0085b"]}]},
    "a newline in a revision": {"configsets": [{"name": "x", "revision": "x-1\nadmin: true"}]},
    "U+2028 in a condition message": {
        "conditions": [{"type": "Ready", "status": "True", "message": "ok\u2028admin: true"}]
    },
    "17 conflicts": {
        "configsets": [{"name": "x", "conflicts": [f"file:/f{i}" for i in range(17)]}]
    },
}
BAD_FOR_THE_SCHEMA_ONLY = {
    # CEL reads a date-time field as a timestamp: the time's spelling is the schema's to check
    "a lower-case RFC 3339 time": {
        "configsets": [{"name": "x", "lastApplied": "2030-01-01t00:00:00z"}]
    },
}


def patch_status(api: client.ApiClient, ns: str, status: dict) -> object:
    return client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, "managednodes", "a", {"status": status}
    )


@pytest.mark.parametrize(
    "status", [*BAD_TEXT.values(), *BAD_FOR_THE_SCHEMA_ONLY.values()],
    ids=[*BAD_TEXT, *BAD_FOR_THE_SCHEMA_ONLY],
)  # fmt: skip
def test_the_crd_schema_refuses_it_from_anyone(cluster, status):  # noqa: F811
    assert refused(lambda: patch_status(cluster.admin, cluster.ns, status))


def test_the_same_text_without_the_break_is_accepted_from_a_node(cluster):  # noqa: F811
    patch_status(
        cluster.a,
        cluster.ns,
        {
            "release": "Arch Linux – rolling (ünïcödé is fine)",
            "configsets": [
                {"name": "x", "revision": "x-7d9f8c", "lastApplied": "2030-01-01T00:00:00Z"}
            ],
        },
    )


def _relax(schema: object) -> object:
    if isinstance(schema, dict):
        return {k: _relax(v) for k, v in schema.items() if k not in RELAXED}
    if isinstance(schema, list):
        return [_relax(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def older_crd(cluster):  # noqa: F811
    """The ManagedNode CRD with no pattern or bound on status, restored after the test."""
    api = client.ApiextensionsV1Api(cluster.admin)
    shipped = yaml.safe_load(CRD.read_text())
    crd = api.read_custom_resource_definition(shipped["metadata"]["name"])
    relaxed = copy.deepcopy(shipped)
    for version in relaxed["spec"]["versions"]:
        props = version["schema"]["openAPIV3Schema"]["properties"]
        props["status"] = _relax(props["status"])
    relaxed["metadata"]["resourceVersion"] = crd.metadata.resource_version
    api.replace_custom_resource_definition(relaxed["metadata"]["name"], relaxed)
    probe = {"release": "relaxed\u2028"}
    # an administrator's write passes once the relaxed schema is served
    eventually(
        lambda: not refused(lambda: patch_status(cluster.admin, cluster.ns, probe)),
        timeout=120,
        message="the API server serves the relaxed ManagedNode schema",
    )
    try:
        yield
    finally:
        patch_status(cluster.admin, cluster.ns, {"release": "Arch Linux"})
        done = subprocess.run(
            ["kubectl", "--kubeconfig", cluster.kubeconfig, "apply", "-f", str(CRD)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        tries = iter(range(1_000_000))

        def strict() -> bool:
            # A new bad value each try: a probe that got through while the relaxed schema was
            # still served is stored, and the same value again is let through by validation
            # ratcheting (an unchanged field is not validated again): it waited forever.
            bad = {"release": f"relaxed {next(tries)}\u2028"}
            return refused(lambda: patch_status(cluster.admin, cluster.ns, bad))

        eventually(
            strict,
            timeout=120,
            message="the API server serves the shipped ManagedNode schema again",
        )


@pytest.mark.parametrize("status", BAD_TEXT.values(), ids=BAD_TEXT.keys())
def test_the_admission_policy_refuses_it_from_a_node_where_the_crd_is_older(
    cluster,  # noqa: F811
    older_crd,
    status,
):
    assert refused(
        lambda: patch_status(cluster.a, cluster.ns, status), "nodemanager-node-restriction"
    )


def test_one_nodes_bad_time_wedges_no_controller_sync(
    cluster,  # noqa: F811
    older_crd,
    kubeconfig,
    tmp_path,
):
    """Issue 27 item 2: a lowercase RFC 3339 lastApplied on node a (what an older CRD let
    through) made every controller sync fail: no summaries, no grants, no revocations. Now
    node a is skipped with a Warning Event and node b is granted and summarised as usual."""
    patch_status(
        cluster.admin,
        cluster.ns,
        {"configsets": [{"name": "for-b", "lastApplied": "2030-01-01t00:00:00z"}]},
    )
    create_secrets(client.CoreV1Api(cluster.admin), cluster.ns, "for-b")
    put_configset(
        cluster.admin,
        cluster.ns,
        "for-b",
        {
            "selector": {"matchLabels": {"kubernetes.io/hostname": "b"}},
            "files": [secret_file("/etc/b", "for-b")],
        },
    )
    own = shipped_kubeconfig(kubeconfig, cluster.ns, tmp_path)
    controller = ControllerProcess(own, cluster.ns, tmp_path, "--sync-period", "1s").start()
    try:
        eventually(controller.leading, timeout=120, message="controller ready")
        b = client.CoreV1Api(config.new_client_from_config(str(cluster.b_path)))
        eventually(lambda: can_read(b, cluster.ns, "for-b"), timeout=30, message="b granted")
        custom = client.CustomObjectsApi(cluster.admin)

        def summarised():
            cs = custom.get_namespaced_custom_object(
                GROUP, VERSION, cluster.ns, "configsets", "for-b"
            )
            return (cs.get("status") or {}).get("matched") == 1

        eventually(summarised, timeout=30, message="for-b summarised")
        events = client.CoreV1Api(cluster.admin).list_namespaced_event(cluster.ns).items
        invalid = [e for e in events if e.reason == "InvalidNodeStatus"]
        assert invalid and invalid[0].involved_object.name == "a"
        assert "lastApplied" in invalid[0].message
    finally:
        assert controller.stop() == 0
