"""Node isolation (issue 13): a node's own credential tried against the real API server.

Two nodes, ``a`` (the attacker) and ``b`` (the victim), each with the credential the README
flow makes: `rbac --shared`, `rbac --hostname`, `token`, `bootstrap`. Every attempt below is one
thing a compromised host could try; each must now be refused or leave no trace. One attempt is
one test, so the report counts attempts held over attempts made.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from nodemanager.kube.client import ClientFactory
from nodemanager.kube.nodes import NodeClient
from tests.cluster.agent import NODEMANAGER
from tests.cluster.helpers import eventually

pytestmark = pytest.mark.cluster
GROUP, VERSION = "common.nodemanager", "v1"
KEY = base64.b64encode(bytes(range(32))).decode()


def nm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([NODEMANAGER, *args], capture_output=True, text=True, timeout=120)


def kubectl(kubeconfig: str, verb: str, text: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, verb, "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )


def credential(kubeconfig: str, ns: str, host: str, directory: Path, *rbac_flags: str) -> Path:
    """The README flow for one host: rbac (with ``rbac_flags``), token, bootstrap; the node's
    kubeconfig."""
    rbac = nm("rbac", "--hostname", host, "--namespace", ns, *rbac_flags)
    assert rbac.returncode == 0, rbac.stderr
    applied = kubectl(kubeconfig, "apply", rbac.stdout)
    assert applied.returncode == 0, applied.stderr
    short, permanent = directory / f"{host}.bootstrap", directory / f"{host}.kubeconfig"
    issued = nm(
        "token", "--hostname", host, "--kubeconfig", kubeconfig, "--namespace", ns,
        "--ttl", "1h", "--out", str(short),
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    done = nm(
        "bootstrap", "--bootstrap-kubeconfig", str(short), "--kubeconfig", str(permanent),
        "--namespace", ns, "--hostname", host,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return permanent


@dataclass
class Cluster:
    admin: client.ApiClient
    kubeconfig: str
    ns: str
    a: client.ApiClient  # the attacker's own credential
    a_path: Path
    b_path: Path

    def custom(self, api: client.ApiClient | None = None) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(api or self.a)

    def core(self, api: client.ApiClient | None = None) -> client.CoreV1Api:
        return client.CoreV1Api(api or self.a)


@pytest.fixture(scope="module")
def cluster(kubeconfig, tmp_path_factory):
    ns = f"iso-{uuid.uuid4().hex[:6]}"
    shared = kubectl(kubeconfig, "apply", nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    directory = tmp_path_factory.mktemp("isolation")
    a_path = credential(kubeconfig, ns, "a", directory)
    b_path = credential(kubeconfig, ns, "b", directory)
    admin = config.new_client_from_config(kubeconfig)
    b = config.new_client_from_config(str(b_path))
    a = config.new_client_from_config(str(a_path))
    for api, name in ((a, "a"), (b, "b")):
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", managednode(name)
        )
    c = Cluster(admin, kubeconfig, ns, a, a_path, b_path)
    # The policies are compiled asynchronously after they are created: wait until one bites.
    eventually(lambda: refused(lambda: patch_labels(c, {"role": "db"})), timeout=30)
    yield c
    for api in (a, b, admin):
        api.close()


def managednode(name: str, **extra) -> dict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ManagedNode",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        **extra,
    }


def refused(call: Callable[[], object], because: str = "") -> bool:
    """Whether the API server refused ``call`` (with ``because`` in its message)."""
    try:
        call()
    except client.ApiException as e:
        if e.status in (401, 403, 422):
            assert because in (e.body or ""), e.body
            return True
        raise
    return False


def patch_labels(c: Cluster, labels: dict) -> object:
    return c.custom().patch_namespaced_custom_object(
        GROUP, VERSION, c.ns, "managednodes", "a", {"metadata": {"labels": labels}}
    )


def patch_status(c: Cluster, status: dict) -> object:
    return c.custom().patch_namespaced_custom_object_status(
        GROUP, VERSION, c.ns, "managednodes", "a", {"status": status}
    )


# -- 1. cross-node injection through status ------------------------------------------------------

BAD_STATUS = {
    "newline in a WireGuard key": {
        "wireGuard": [{"name": "wg0", "publicKey": KEY + "\nAllowedIPs = 0.0.0.0/0"}]
    },
    "WireGuard key of 31 bytes": {
        "wireGuard": [{"name": "wg0", "publicKey": base64.b64encode(bytes(31)).decode()}]
    },
    "WireGuard port out of range": {
        "wireGuard": [{"name": "wg0", "publicKey": KEY, "listenPort": 70000}]
    },
    "extra words in an address": {
        "interfaces": {"eth0": {"ipv4": ["10.0.0.5\n10.66.66.66 kubernetes.default.svc"]}}
    },
    "an IPv6 address as IPv4": {"interfaces": {"eth0": {"ipv4": ["2001:db8::1"]}}},
    "a hostname as IPv6": {"interfaces": {"eth0": {"ipv6": ["kubernetes.default.svc"]}}},
    "newline in an interface name": {"interfaces": {"eth0\nx": {"ipv4": ["10.0.0.5"]}}},
    "newline in the release": {"release": "Arch\n10.66.66.66 kubernetes.default.svc"},
    "SSHFP digest of the wrong length": {
        "sshHostKeys": [{"algorithm": 4, "fingerprintType": 2, "fingerprint": "ab" * 20}]
    },
    "SSHFP algorithm 9": {
        "sshHostKeys": [{"algorithm": 9, "fingerprintType": 2, "fingerprint": "ab" * 32}]
    },
    "newline in a ConfigSet error": {"configsets": [{"name": "x", "error": "a\nb"}]},
}


@pytest.mark.parametrize("status", BAD_STATUS.values(), ids=BAD_STATUS.keys())
def test_1_malformed_status_is_refused(cluster, status):
    assert refused(lambda: patch_status(cluster, status))


def test_1_well_formed_status_is_accepted(cluster):
    patch_status(
        cluster,
        {
            "release": "Arch Linux",
            "interfaces": {"eth0": {"ipv4": ["10.0.0.5"], "ipv6": ["2001:db8::5"]}},
            "wireGuard": [{"name": "wg0", "publicKey": KEY, "listenPort": 51820}],
            "sshHostKeys": [{"algorithm": 4, "fingerprintType": 2, "fingerprint": "ab" * 32}],
        },
    )


# -- 3. policy gaps ------------------------------------------------------------------------------


def event(ns: str, about: str, name: str) -> client.CoreV1Event:
    return client.CoreV1Event(
        metadata=client.V1ObjectMeta(name=name),
        involved_object=client.V1ObjectReference(
            api_version=f"{GROUP}/{VERSION}", kind="ManagedNode", name=about, namespace=ns
        ),
        reason="Forged",
        message="forged",
        type="Normal",
    )


def test_3_create_own_managednode_with_spec_is_refused(cluster, kubeconfig):
    # The node's own ManagedNode is missing (an admin deleted it): re-creating it with a spec.
    cluster.custom(cluster.admin).delete_namespaced_custom_object(
        GROUP, VERSION, cluster.ns, "managednodes", "a"
    )
    try:
        assert refused(
            lambda: cluster.custom().create_namespaced_custom_object(
                GROUP, VERSION, cluster.ns, "managednodes", managednode("a", spec={"domain": "x"})
            ),
            "spec is set by administrators",
        )
    finally:
        cluster.custom().create_namespaced_custom_object(
            GROUP, VERSION, cluster.ns, "managednodes", managednode("a")
        )


def test_3_finalizer_on_own_managednode_is_refused(cluster):
    assert refused(
        lambda: cluster.custom().patch_namespaced_custom_object(
            GROUP,
            VERSION,
            cluster.ns,
            "managednodes",
            "a",
            {"metadata": {"finalizers": ["example.com/block-delete"]}},
        ),  # fmt: skip
        "finalizers and ownerReferences",
    )


def test_3_owner_reference_on_own_managednode_is_refused(cluster):
    owner = {"apiVersion": "v1", "kind": "Secret", "name": "x", "uid": str(uuid.uuid4())}
    assert refused(
        lambda: cluster.custom().patch_namespaced_custom_object(
            GROUP,
            VERSION,
            cluster.ns,
            "managednodes",
            "a",
            {"metadata": {"ownerReferences": [owner]}},
        ),  # fmt: skip
        "finalizers and ownerReferences",
    )


def test_3_event_about_another_node_is_refused(cluster):
    assert refused(
        lambda: cluster.core().create_namespaced_event(
            cluster.ns, event(cluster.ns, "b", "forged-b")
        ),
        "only record Events about its own ManagedNode",
    )


def test_3_event_about_itself_is_allowed(cluster):
    cluster.core().create_namespaced_event(cluster.ns, event(cluster.ns, "a", "own-a"))


def test_3_a_restarted_agent_counts_its_event_on_without_reading_events(cluster, caplog):
    """A node may create and patch Events but not read them (they tell of other nodes): the
    restarted agent's repeat must still aggregate, with the node's own credential."""
    first = NodeClient(ClientFactory(str(cluster.a_path)), cluster.ns, "a")
    first.event("Restarted", "same message", warning=True)
    restarted = NodeClient(ClientFactory(str(cluster.a_path)), cluster.ns, "a")
    with caplog.at_level(logging.WARNING):
        restarted.event("Restarted", "same message", warning=True)
        restarted.event("Restarted", "same message", warning=True)
    assert "could not record event" not in caplog.text
    assert refused(lambda: cluster.core().list_namespaced_event(cluster.ns), "forbidden")
    ours = [
        e
        for e in cluster.core(cluster.admin).list_namespaced_event(cluster.ns).items
        if e.reason == "Restarted"
    ]
    assert [(e.involved_object.name, e.source.host, e.count) for e in ours] == [("a", "a", 3)]


def test_3_events_k8s_io_event_about_another_node_is_refused(cluster):
    body = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="forged-b-v1"),
        event_time=dt.datetime.now(dt.UTC),
        action="Forge",
        reason="Forged",
        note="forged",
        type="Normal",
        reporting_controller="nodemanager",
        reporting_instance="a",
        regarding=client.V1ObjectReference(
            api_version=f"{GROUP}/{VERSION}", kind="ManagedNode", name="b", namespace=cluster.ns
        ),
    )
    assert refused(
        lambda: client.EventsV1Api(cluster.a).create_namespaced_event(cluster.ns, body),
        "only record Events about its own ManagedNode",
    )


def test_3_patching_an_event_about_another_node_is_refused(cluster):
    cluster.core(cluster.admin).create_namespaced_event(
        cluster.ns, event(cluster.ns, "b", "real-b")
    )
    assert refused(
        lambda: cluster.core().patch_namespaced_event(
            "real-b", cluster.ns, {"message": "rewritten by a"}
        ),
        "only record Events about its own ManagedNode",
    )
    assert cluster.core(cluster.admin).read_namespaced_event("real-b", cluster.ns).message == (
        "forged"
    )


def test_3_lease_under_another_nodes_name_is_refused(cluster):
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="b"), spec=client.V1LeaseSpec(holder_identity="b")
    )
    api = client.CoordinationV1Api(cluster.a)
    assert refused(lambda: api.replace_namespaced_lease("b", cluster.ns, body))
    # its own Lease (made by its rbac output), held as another node
    own = api.read_namespaced_lease("a", cluster.ns)
    own.spec = client.V1LeaseSpec(holder_identity="b")
    assert refused(
        lambda: api.replace_namespaced_lease("a", cluster.ns, own), "only hold Leases as itself"
    )


def test_3_a_node_creates_no_lease(cluster):
    """Not a junk Lease, nor the liveness Lease of a host not onboarded yet: the Leases a node
    may hold are made by its rbac output."""
    for name in ("junk-1", "not-yet-onboarded"):
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=name), spec=client.V1LeaseSpec(holder_identity="a")
        )
        assert refused(
            lambda body=body: client.CoordinationV1Api(cluster.a).create_namespaced_lease(
                cluster.ns, body
            )
        )


@pytest.mark.parametrize(
    "labels, because",
    [
        ({"kubernetes.io/hostname": "b"}, "kubernetes.io/hostname must be the node's own name"),
        ({"kubernetes.io/os": "Debian"}, "kubernetes.io/os must be an os-release ID"),
        ({"role": "db"}, "may only set its managed labels"),
        ({"nodemanager.io/policy-self-test": "x"}, "may only set its managed labels"),
    ],
    ids=["hostname=b", "os=Debian", "role=db", "unmanaged key"],
)
def test_3_false_managed_label_values_are_refused(cluster, labels, because):
    assert refused(lambda: patch_labels(cluster, labels), because)


def test_3_spec_write_is_refused(cluster):
    assert refused(
        lambda: cluster.custom().patch_namespaced_custom_object(
            GROUP, VERSION, cluster.ns, "managednodes", "a", {"spec": {"domain": "evil"}}
        ),
        "spec is set by administrators",
    )


def test_3_admitting_itself_to_a_rollout_revision_is_refused(cluster):
    """Admissions of staged rollouts (spec.configsetRevisions) are the controller's to write."""
    assert refused(
        lambda: cluster.custom().patch_namespaced_custom_object(
            GROUP,
            VERSION,
            cluster.ns,
            "managednodes",
            "a",
            {"spec": {"configsetRevisions": {"web": "web-0123456789"}}},
        ),  # fmt: skip
        "spec is set by administrators",
    )


def test_3_writing_another_nodes_managednode_is_refused(cluster):
    assert refused(
        lambda: cluster.custom().patch_namespaced_custom_object_status(
            GROUP, VERSION, cluster.ns, "managednodes", "b", {"status": {"release": "x"}}
        )
    )


# -- 5. tokens -----------------------------------------------------------------------------------


def token_request(seconds: int, bound: client.V1BoundObjectReference | None):
    return client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=seconds, bound_object_ref=bound
        )
    )


def request(c: Cluster, seconds: int, bound=None):
    return c.core().create_namespaced_service_account_token(
        "nodemanager-a", c.ns, token_request(seconds, bound)
    )


def test_5_unbound_token_is_refused(cluster):
    assert refused(lambda: request(cluster, 3600), "bound to its own binding Secret")


def test_5_token_bound_to_another_secret_is_refused(cluster):
    cluster.core(cluster.admin).create_namespaced_secret(
        cluster.ns, client.V1Secret(metadata=client.V1ObjectMeta(name="forever"))
    )
    other = client.V1BoundObjectReference(api_version="v1", kind="Secret", name="forever")
    assert refused(lambda: request(cluster, 3600, other), "bound to its own binding Secret")


def test_5_a_ten_year_token_is_refused(cluster):
    own = client.V1BoundObjectReference(api_version="v1", kind="Secret", name="nodemanager-a")
    assert refused(lambda: request(cluster, 10 * 365 * 86400, own), "at most 30 days")
    request(cluster, 3600, own)  # what the agent's renewal asks for: allowed


def test_5_cli_caps_the_token_lifetime(cluster, tmp_path):
    out = nm(
        "bootstrap", "--bootstrap-kubeconfig", str(cluster.a_path), "--kubeconfig",
        str(tmp_path / "k"), "--namespace", cluster.ns, "--hostname", "a", "--token-ttl", "8760h",
    )  # fmt: skip
    assert out.returncode != 0 and "--token-ttl" in out.stderr and "30 days" in out.stderr
    assert not (tmp_path / "k").exists()


def works(path: Path, ns: str) -> bool:
    api = config.new_client_from_config(str(path))
    try:
        client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, ns, "configsets")
        return True
    except client.ApiException as e:
        if e.status == 401:
            return False
        raise
    finally:
        api.close()


def test_5_rerunning_token_keeps_earlier_tokens_unless_asked_and_revoke_revokes_all(
    cluster, kubeconfig, tmp_path
):
    """`token` is safe to re-run (upstream documents it so): a running agent keeps working;
    --revoke-earlier ends every earlier token."""
    ns = cluster.ns
    old = credential(kubeconfig, ns, "c", tmp_path)
    assert works(old, ns)
    token = ["token", "--hostname", "c", "--kubeconfig", kubeconfig, "--namespace", ns]
    again = tmp_path / "c.again"
    issued = nm(*token, "--out", str(again))
    assert issued.returncode == 0, issued.stderr
    assert works(old, ns) and works(again, ns)
    new = tmp_path / "c.new"
    issued = nm(*token, "--revoke-earlier", "--out", str(new))
    assert issued.returncode == 0, issued.stderr
    eventually(
        lambda: not works(old, ns) and not works(again, ns),
        timeout=30,
        message="the earlier tokens are revoked",
    )
    assert works(new, ns)
    revoked = nm("revoke", "--hostname", "c", "--kubeconfig", kubeconfig, "--namespace", ns)
    assert revoked.returncode == 0, revoked.stderr
    eventually(lambda: not works(new, ns), timeout=30, message="revoke ends every token")
    again = nm("revoke", "--hostname", "c", "--kubeconfig", kubeconfig, "--namespace", ns)
    assert again.returncode != 0 and "nothing to revoke" in again.stderr


# -- 6. per-node RBAC output holds per-node objects only -----------------------------------------


def test_6_deleting_one_node_deletes_only_that_node(cluster, kubeconfig, tmp_path):
    ns = cluster.ns
    d_path = credential(kubeconfig, ns, "d", tmp_path)
    text = nm("rbac", "--hostname", "d", "--namespace", ns).stdout
    docs = [d for d in yaml.safe_load_all(text) if d]
    shared = {d["metadata"]["name"] for d in yaml.safe_load_all(nm("rbac", "--shared").stdout)}
    # The Namespace (with d's own guard of it) and d's objects; no shared policy
    assert [d["kind"] for d in docs[:3]] == [
        "Namespace",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    assert {d["kind"] for d in docs[3:]} == {"ServiceAccount", "Role", "RoleBinding", "Lease"}
    assert not shared & {d["metadata"]["name"] for d in docs[1:]}
    deleted = kubectl(kubeconfig, "delete", text)
    # kubectl says the Namespace is kept (its one error); everything of d is deleted
    assert deleted.returncode == 1 and "nodemanager.io/keep-" in deleted.stderr, deleted.stderr
    eventually(lambda: not works(d_path, ns), timeout=30, message="d's credential is gone")
    leases = client.CoordinationV1Api(cluster.admin).list_namespaced_lease(ns).items
    assert "d" not in {lease.metadata.name for lease in leases}  # its Lease went with it
    client.CoreV1Api(cluster.admin).read_namespace(ns)  # the Namespace stays
    assert works(cluster.a_path, ns) and works(cluster.b_path, ns)  # and so do the others
    assert refused(lambda: patch_labels(cluster, {"role": "db"}))  # and so does the policy


# -- 7. path aliases -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/x//a.conf", "/x/", "/x/./a.conf", "/x/../a.conf", "/x/a\x00b", "/x/a\nb"]
)
def test_7_path_aliases_and_control_characters_are_refused_by_the_crd(cluster, path):
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": f"p-{uuid.uuid4().hex[:6]}"},
        "spec": {"files": [{"path": path, "content": "x"}]},
    }
    with pytest.raises(client.ApiException) as caught:
        cluster.custom(cluster.admin).create_namespaced_custom_object(
            GROUP, VERSION, cluster.ns, "configsets", body
        )
    assert caught.value.status == 422 and "spec.files[0].path" in caught.value.body


def test_8_upstream_wireguard_grants_that_one_secret(cluster, kubeconfig, tmp_path):
    """Migration: `rbac --upstream-wireguard wg0` lets the node read the Secret upstream kept its
    key in (wg-wg0-<node>), and no other."""
    core = client.CoreV1Api(cluster.admin)
    for name in ("wg-wg0-w", "wg-wg1-w", "wg-wg0-a"):
        core.create_namespaced_secret(
            cluster.ns,
            client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data={"k": "v"}),
        )
    path = credential(kubeconfig, cluster.ns, "w", tmp_path, "--upstream-wireguard", "wg0")
    node = client.CoreV1Api(config.new_client_from_config(str(path)))
    assert node.read_namespaced_secret("wg-wg0-w", cluster.ns).data
    for other in ("wg-wg1-w", "wg-wg0-a"):
        assert refused(lambda other=other: node.read_namespaced_secret(other, cluster.ns))
