"""rbac -> token -> bootstrap -> the agent runs with the node credential, least privilege proven
on the real API server with RBAC and the admission policy on."""

from __future__ import annotations

import stat
import subprocess
import uuid

import pytest
import yaml
from kubernetes import client, config

from tests.cluster.agent import NODEMANAGER, Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, applied, for_host, put_configset

pytestmark = pytest.mark.cluster


def nm(*args):
    return subprocess.run([NODEMANAGER, *args], capture_output=True, text=True, timeout=120)


def kubectl_apply(kubeconfig, text):
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )


def claims(kubeconfig_path):
    from nodemanager.kube.tokens import claims as jwt_claims
    from nodemanager.kube.tokens import token_of

    return jwt_claims(token_of(str(kubeconfig_path)))


@pytest.fixture
def node_name():
    return f"web-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def bootstrapped(kubeconfig, node_name, tmp_path):
    ns = f"nm-{uuid.uuid4().hex[:6]}"
    shared = kubectl_apply(kubeconfig, nm("rbac", "--shared", "--namespace", ns).stdout)
    assert shared.returncode == 0, shared.stderr
    manifests = nm("rbac", "--hostname", node_name, "--namespace", ns)
    assert manifests.returncode == 0, manifests.stderr
    applied_rbac = kubectl_apply(kubeconfig, manifests.stdout)
    assert applied_rbac.returncode == 0, applied_rbac.stderr
    short = tmp_path / "bootstrap.kubeconfig"
    issued = nm(
        "token",
        "--hostname",
        node_name,
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        ns,
        "--ttl",
        "10m",
        "--out",
        str(short),
    )
    assert issued.returncode == 0, issued.stderr
    permanent = tmp_path / "etc" / "kubeconfig"
    done = nm(
        "bootstrap",
        "--bootstrap-kubeconfig",
        str(short),
        "--kubeconfig",
        str(permanent),
        "--namespace",
        ns,
        "--hostname",
        node_name,
        "--token-ttl",
        "48h",
    )
    assert done.returncode == 0, done.stderr
    return ns, short, permanent


def test_rbac_token_bootstrap_then_agent_runs_with_node_credential(
    kubeconfig, api_client, node_name, bootstrapped, tmp_path
):
    ns, short, permanent = bootstrapped
    for path in (short, permanent):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    short_claims, long_claims = claims(short), claims(permanent)
    assert (
        short_claims["sub"]
        == long_claims["sub"]
        == f"system:serviceaccount:{ns}:nodemanager-{node_name}"
    )
    assert abs((short_claims["exp"] - short_claims["iat"]) - 600) <= 5  # --ttl 10m
    assert abs((long_claims["exp"] - long_claims["iat"]) - 48 * 3600) <= 5  # --token-ttl 48h
    data = yaml.safe_load(permanent.read_text())
    assert data["clusters"][0]["cluster"][
        "certificate-authority-data"
    ]  # the admin context's CA travels along

    target = tmp_path / "from-node-credential"
    put_configset(
        api_client, ns, "hello", for_host(node_name, [{"path": str(target), "content": "hi\n"}])
    )
    agent = Agent(str(permanent), ns, node_name, tmp_path / "state").start()
    try:
        applied(api_client, ns, node_name, "hello")
        assert target.read_text() == "hi\n"

        def lease_held_by_node():
            try:
                lease = client.CoordinationV1Api(api_client).read_namespaced_lease(node_name, ns)
            except client.ApiException as e:
                assert e.status == 404, e
                return None
            # rbac may create the Lease itself (empty spec): the event is the node's renewal
            return lease if lease.spec.holder_identity == node_name else None

        lease = eventually(lease_held_by_node, message="the node holds its Lease")
        assert lease.spec.renew_time is not None
    finally:
        agent.stop()


def test_node_credential_is_least_privilege(
    kubeconfig, api_client, node_name, bootstrapped, tmp_path
):
    ns, _, permanent = bootstrapped
    admin_custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    other_ns = f"other-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other_ns)))
    core.create_namespaced_secret(
        other_ns, client.V1Secret(metadata=client.V1ObjectMeta(name="db"), string_data={"pw": "x"})
    )
    core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="nodemanager-other"))
    )
    admin_custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "managednodes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode", "metadata": {"name": "other"}},
    )

    node_api = config.new_client_from_config(str(permanent))
    custom, node_core = client.CustomObjectsApi(node_api), client.CoreV1Api(node_api)

    def denied(call) -> str:
        with pytest.raises(client.ApiException) as caught:
            call()
        assert caught.value.status in (403, 422), caught.value
        return caught.value.body

    mine = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ManagedNode",
        "metadata": {"name": node_name, "labels": {"kubernetes.io/hostname": node_name}},
    }
    custom.create_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", mine
    )  # its own: allowed
    custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "managednodes",
        node_name,
        {"metadata": {"labels": {"agent.nodemanager.io/rack": "r1"}}},
    )  # self-label: allowed

    denied(lambda: node_core.read_namespaced_secret("db", other_ns))
    denied(
        lambda: custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", "other", {"metadata": {"labels": {"x": "y"}}}
        )
    )
    assert "only write the ManagedNode named after it" in denied(
        lambda: custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", {**mine, "metadata": {"name": "impostor"}}
        )
    )
    assert "only set its managed labels" in denied(
        lambda: custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", node_name, {"metadata": {"labels": {"role": "db"}}}
        )
    )
    assert "spec is set by administrators" in denied(
        lambda: custom.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", node_name, {"spec": {"domain": "evil"}}
        )
    )
    denied(
        lambda: node_core.create_namespaced_service_account_token(
            "nodemanager-other",
            ns,
            client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[])),
        )
    )
    # No Secret or ConfigMap of its own namespace either: only the fleet controller's per-node
    # Role grants those, by name (tests/cluster/test_controller_access.py).
    core.create_namespaced_secret(
        ns, client.V1Secret(metadata=client.V1ObjectMeta(name="db"), string_data={"pw": "x"})
    )
    denied(lambda: node_core.read_namespaced_secret("db", ns))
    denied(lambda: node_core.list_namespaced_secret(ns))
    denied(lambda: node_core.list_namespaced_config_map(ns))
    # What it may do: read its namespace's ConfigSets, renew its own token.
    custom.list_namespaced_custom_object(GROUP, VERSION, ns, "configsets")
    node_api.close()

    # An administrator's label stays the administrator's.
    admin_custom.patch_namespaced_custom_object(
        GROUP, VERSION, ns, "managednodes", node_name, {"metadata": {"labels": {"role": "web"}}}
    )
    node_api = config.new_client_from_config(str(permanent))
    assert "may not remove or change labels set by administrators" in denied(
        lambda: client.CustomObjectsApi(node_api).patch_namespaced_custom_object(
            GROUP, VERSION, ns, "managednodes", node_name, {"metadata": {"labels": {"role": None}}}
        )
    )
    node_api.close()


def works(kubeconfig_path) -> bool:
    """Whether the credential in ``kubeconfig_path`` is still accepted (401: revoked)."""
    api = config.new_client_from_config(str(kubeconfig_path))
    try:
        client.VersionApi(api).get_code()
        client.CoreV1Api(api).list_namespaced_config_map("default", limit=1)
    except client.ApiException as e:
        if e.status == 401:
            return False
        assert e.status == 403, e  # authenticated, merely not allowed
    finally:
        api.close()
    return True


def test_every_command_reruns_safely_and_bootstrap_rotates(
    kubeconfig, node_name, bootstrapped, tmp_path
):
    ns, short, permanent = bootstrapped
    again = kubectl_apply(kubeconfig, nm("rbac", "--hostname", node_name, "--namespace", ns).stdout)
    assert again.returncode == 0, again.stderr
    before = permanent.read_text()
    token = ["token", "--hostname", node_name, "--kubeconfig", kubeconfig, "--namespace", ns]
    # Re-running `token` (upstream documents it as safe) cuts off no running agent.
    assert nm(*token, "--out", str(short)).returncode == 0
    assert works(permanent) and works(short)
    # The host bootstraps again with the new one.
    rotated = nm(
        "bootstrap",
        "--bootstrap-kubeconfig",
        str(short),
        "--kubeconfig",
        str(permanent),
        "--namespace",
        ns,
        "--hostname",
        node_name,
        "--token-ttl",
        "1h",
    )
    assert rotated.returncode == 0, rotated.stderr
    assert permanent.read_text() != before
    c = claims(permanent)
    assert abs((c["exp"] - c["iat"]) - 3600) <= 5
    # Asked for, every earlier token goes: the agent's too, and only the new one works.
    fresh = tmp_path / "fresh.kubeconfig"
    assert nm(*token, "--revoke-earlier", "--out", str(fresh)).returncode == 0
    assert eventually(
        lambda: not works(permanent) and not works(short),
        timeout=30,
        message="the earlier tokens are refused once their binding Secret is gone",
    )
    assert works(fresh)


def test_daemon_renews_its_token_without_restart(
    kubeconfig, api_client, node_name, bootstrapped, tmp_path
):
    ns, short, permanent = bootstrapped
    # The API server's minimum token lifetime is 10 minutes; renewal at ~80% would take 8. A token
    # issued with a backdated lifetime is not possible, so start the agent with the 10-minute token
    # and check the renewer's schedule and one forced renewal instead.
    from nodemanager.bootstrap.credentials import TokenRenewer

    renewer = TokenRenewer(str(short), node_name, ns)
    due = renewer.due_in()
    assert 0.7 * 600 <= due <= 0.86 * 600
    before = claims(short)
    renewer.renew()
    after = claims(short)
    assert after["iat"] >= before["iat"] and abs((after["exp"] - after["iat"]) - 600) <= 5
    assert stat.S_IMODE(short.stat().st_mode) == 0o600
    target = tmp_path / "renewed"
    put_configset(
        api_client, ns, "r", for_host(node_name, [{"path": str(target), "content": "ok\n"}])
    )
    agent = Agent(str(short), ns, node_name, tmp_path / "state").start()
    try:
        applied(api_client, ns, node_name, "r")
        renewer.renew()  # rewrite the kubeconfig under the running agent
        put_configset(
            api_client,
            ns,
            "r",
            for_host(node_name, [{"path": str(target), "content": "after rotation\n"}]),
        )
        eventually(
            lambda: target.read_text() == "after rotation\n",
            timeout=60,
            message="works after rotation",
        )
    finally:
        agent.stop()
