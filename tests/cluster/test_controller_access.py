"""Per-node Secret and ConfigMap access kept by the controller, proven with the API server's own
authorizer: each node uses its own credential made the README way (`rbac --hostname`, `token`,
`bootstrap`), which grants no Secret or ConfigMap at all, and the controller runs with the
credential of the ServiceAccount deploy/controller.yaml ships."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, put_configset
from tests.cluster.test_isolation import credential

pytestmark = pytest.mark.cluster


@pytest.fixture
def controller(kubeconfig, namespace, tmp_path) -> Iterator[ControllerProcess]:
    own = shipped_kubeconfig(kubeconfig, namespace, tmp_path)
    c = ControllerProcess(own, namespace, tmp_path, "--sync-period", "1s").start()
    eventually(c.leading, timeout=120, message="controller ready")
    yield c
    assert c.stop() == 0


def as_node(kubeconfig: str, namespace: str, node: str, directory) -> client.CoreV1Api:
    """The node's own credential (README flow)."""
    return client.CoreV1Api(
        config.new_client_from_config(str(credential(kubeconfig, namespace, node, directory)))
    )


def can_read(core: client.CoreV1Api, namespace: str, secret: str) -> bool:
    try:
        core.read_namespaced_secret(secret, namespace)
        return True
    except client.ApiException as e:
        assert e.status == 403, e
        return False


def managed_node(api_client, namespace, name, labels):
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ManagedNode",
            "metadata": {"name": name, "labels": labels},
            "spec": {},
        },
    )


def create_secrets(core: client.CoreV1Api, namespace: str, *names: str) -> None:
    for name in names:
        core.create_namespaced_secret(
            namespace,
            client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data={"k": name}),
        )


def secret_file(path, *secrets):
    return {"path": path, "template": "x", "secretRefs": [{"name": s} for s in secrets]}


def test_each_node_reads_only_the_secrets_its_configsets_reference(
    api_client, kubeconfig, namespace, controller, tmp_path, measured
):
    core = client.CoreV1Api(api_client)
    a, b = (as_node(kubeconfig, namespace, n, tmp_path) for n in ("a", "b"))
    create_secrets(core, namespace, "sa", "sb", "sc")
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm-a"), data={"k": "v"})
    )
    # `rbac` alone grants no Secret or ConfigMap, not even by name.
    assert not can_read(a, namespace, "sa")
    with pytest.raises(client.ApiException) as e:
        a.read_namespaced_config_map("cm-a", namespace)
    assert e.value.status == 403
    managed_node(api_client, namespace, "a", {"role": "a"})
    managed_node(api_client, namespace, "b", {"role": "b"})
    put_configset(
        api_client,
        namespace,
        "for-a",
        {
            "selector": {"matchLabels": {"role": "a"}},
            "files": [{**secret_file("/etc/a", "sa"), "configMapRefs": [{"name": "cm-a"}]}],
        },
    )
    put_configset(
        api_client,
        namespace,
        "for-b",
        {"selector": {"matchLabels": {"role": "b"}}, "files": [secret_file("/etc/b", "sb")]},
    )
    eventually(lambda: can_read(a, namespace, "sa") and can_read(b, namespace, "sb"), timeout=30)
    assert not can_read(a, namespace, "sb"), "a must not read a Secret only b's ConfigSet names"
    assert not can_read(b, namespace, "sa")
    assert a.read_namespaced_config_map("cm-a", namespace).data == {"k": "v"}
    # A watch by name is allowed (what the agent does); a namespace-wide list is not.
    assert [
        s.metadata.name
        for s in a.list_namespaced_secret(namespace, field_selector="metadata.name=sa").items
    ] == ["sa"]
    with pytest.raises(client.ApiException) as e:
        a.list_namespaced_secret(namespace)
    assert e.value.status == 403

    # A new reference is readable within seconds.
    added = time.monotonic()
    put_configset(
        api_client,
        namespace,
        "for-a",
        {"selector": {"matchLabels": {"role": "a"}}, "files": [secret_file("/etc/a", "sa", "sc")]},
    )
    eventually(lambda: can_read(a, namespace, "sc"), timeout=30, message="new reference readable")
    granted_in = time.monotonic() - added

    # A removed reference is revoked (and the ConfigMap with it).
    removed = time.monotonic()
    put_configset(
        api_client,
        namespace,
        "for-a",
        {"selector": {"matchLabels": {"role": "a"}}, "files": [secret_file("/etc/a", "sc")]},
    )
    eventually(lambda: not can_read(a, namespace, "sa"), timeout=30, message="reference revoked")
    revoked_in = time.monotonic() - removed
    with pytest.raises(client.ApiException):
        a.read_namespaced_config_map("cm-a", namespace)

    # Labels count too: b relabelled into for-a's selector reads sc, and loses sb.
    client.CustomObjectsApi(api_client).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, "managednodes", "b", {"metadata": {"labels": {"role": "a"}}}
    )
    eventually(
        lambda: can_read(b, namespace, "sc") and not can_read(b, namespace, "sb"), timeout=30
    )
    measured("Secret reference granted (node's credential)", granted_in)
    measured("Secret reference revoked (node's credential)", revoked_in)


def test_a_node_held_at_an_earlier_revision_keeps_that_revisions_secrets(
    api_client, kubeconfig, namespace, controller, tmp_path
):
    """Access follows what the node is admitted to run (issue 27 item 6): held at revision 1 by
    a paused rollout, it still reads the Secret revision 1 references and not the one only the
    live spec names; admitted to the new revision, the other way round."""
    core = client.CoreV1Api(api_client)
    a = as_node(kubeconfig, namespace, "a", tmp_path)
    create_secrets(core, namespace, "old", "new")
    managed_node(api_client, namespace, "a", {"role": "a"})
    staged = {"selector": {"matchLabels": {"role": "a"}}, "rollout": {"maxUnavailable": 1}}
    put_configset(
        api_client, namespace, "staged", {**staged, "files": [secret_file("/etc/s", "old")]}
    )
    eventually(lambda: can_read(a, namespace, "old"), timeout=30, message="revision 1 granted")
    put_configset(
        api_client,
        namespace,
        "staged",
        {**staged, "paused": True, "files": [secret_file("/etc/s", "new")]},
    )

    def revisions():
        return client.AppsV1Api(api_client).list_namespaced_controller_revision(namespace).items

    eventually(lambda: len(revisions()) == 2, timeout=30, message="revision 2 made")
    admitted = lambda: client.CustomObjectsApi(api_client).get_namespaced_custom_object(  # noqa: E731
        GROUP, VERSION, namespace, "managednodes", "a"
    )["spec"]["configsetRevisions"]["staged"]
    held = admitted()
    for _ in range(3):  # a few syncs of the controller (1 s each) change nothing
        time.sleep(1)  # a negative check: the controller's period is the unit
        assert admitted() == held
        assert can_read(a, namespace, "old") and not can_read(a, namespace, "new")
    put_configset(
        api_client, namespace, "staged", {**staged, "files": [secret_file("/etc/s", "new")]}
    )
    eventually(
        lambda: can_read(a, namespace, "new") and not can_read(a, namespace, "old"),
        timeout=30,
        message="admitted to revision 2: its Secret, and no longer revision 1's",
    )
    assert admitted() != held


def test_self_reported_labels_grant_no_secret(
    api_client, kubeconfig, namespace, controller, tmp_path
):
    """A node sets kubernetes.io/os (and kubernetes.io/arch) on itself (issue 27 item 1): a
    ConfigSet selecting on them grants its Secret to no node; one selecting on an
    administrator's label does. (nodemanager.io/os, set by earlier agents, neither.)"""
    core = client.CoreV1Api(api_client)
    a = as_node(kubeconfig, namespace, "a", tmp_path)
    create_secrets(core, namespace, "by-os", "by-role")
    managed_node(api_client, namespace, "a", {"kubernetes.io/os": "vault", "role": "a"})
    put_configset(
        api_client,
        namespace,
        "by-os",
        {
            "selector": {"matchLabels": {"kubernetes.io/os": "vault"}},
            "files": [secret_file("/etc/os", "by-os")],
        },
    )
    put_configset(
        api_client,
        namespace,
        "by-role",
        {"selector": {"matchLabels": {"role": "a"}}, "files": [secret_file("/etc/r", "by-role")]},
    )
    eventually(lambda: can_read(a, namespace, "by-role"), timeout=30, message="admin label grants")
    assert not can_read(a, namespace, "by-os")
