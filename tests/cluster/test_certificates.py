"""Node client certificates on the real API server: `bootstrap --certificate`, the fleet
controller's approver (controller/csrapprove.py) and kube-controller-manager signing with the
cluster CA (the ``csr_signer`` fixture). The controller runs with deploy/controller.yaml's
permissions, nodes with the credentials the README flow gives them."""

from __future__ import annotations

import base64
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client, config

from nodemanager.api import nodecert
from nodemanager.bootstrap.certificate import credential_path
from nodemanager.kube import csr
from nodemanager.kube.errors import KubeError
from tests.cluster.agent import NODEMANAGER, Agent
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_controller_access import can_read, create_secrets, secret_file
from tests.cluster.test_daemon import GROUP, VERSION, applied, for_host, put_configset

pytestmark = pytest.mark.cluster


def nm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NODEMANAGER, *args], capture_output=True, text=True, timeout=120)


def kubectl_apply(kubeconfig: str, text: str) -> None:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@dataclass
class Fleet:
    admin: str  # admin kubeconfig
    namespace: str
    directory: Path
    controller: ControllerProcess

    def admit(self, host: str) -> Path:
        """`rbac --certificate` applied and a 10-minute bootstrap token (`token`) for ``host``."""
        out = nm("rbac", "--hostname", host, "--namespace", self.namespace, "--certificate")
        assert out.returncode == 0, out.stderr
        kubectl_apply(self.admin, out.stdout)
        boot = self.directory / f"{host}-bootstrap.kubeconfig"
        issued = nm(
            "token", "--hostname", host, "--kubeconfig", self.admin,
            "--namespace", self.namespace, "--ttl", "10m", "--out", str(boot),
        )  # fmt: skip
        assert issued.returncode == 0, issued.stderr
        return boot

    def bootstrap(self, host: str, boot: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return nm(
            "bootstrap", "--certificate", "--bootstrap-kubeconfig", str(boot),
            "--kubeconfig", str(self.directory / f"{host}.kubeconfig"),
            "--namespace", self.namespace, "--hostname", host, *extra,
        )  # fmt: skip


@pytest.fixture(scope="module")
def fleet(csr_signer, kubeconfig, tmp_path_factory) -> Iterator[Fleet]:
    directory = tmp_path_factory.mktemp("certificates")
    namespace = f"nm-cert-{uuid.uuid4().hex[:6]}"
    shared = nm("rbac", "--shared", "--namespace", namespace)
    kubectl_apply(kubeconfig, shared.stdout)
    own = shipped_kubeconfig(kubeconfig, namespace, directory)
    controller = ControllerProcess(
        own, namespace, directory, "--sync-period", "1s", "--approve-node-certificates"
    ).start()
    eventually(controller.leading, timeout=120, message="controller ready")
    yield Fleet(kubeconfig, namespace, directory, controller)
    assert controller.stop() == 0


def requests(api_client) -> list[dict]:
    return client.CustomObjectsApi(api_client).list_cluster_custom_object(
        csr.GROUP, csr.VERSION, csr.PLURAL
    )["items"]


def conditions(raw: dict) -> dict[str, str]:
    return {
        c["type"]: c.get("reason", "") for c in (raw.get("status") or {}).get("conditions") or []
    }


def events_about(api_client, namespace: str, name: str) -> list[client.CoreV1Event]:
    found = client.CoreV1Api(api_client).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return found.items


def whoami(kubeconfig: str) -> str:
    api = config.new_client_from_config(kubeconfig)
    try:
        review = client.AuthenticationV1Api(api).create_self_subject_review(
            client.V1SelfSubjectReview()
        )
        return review.status.user_info.username
    finally:
        api.close()


def test_an_approved_node_request_is_signed_by_the_cluster_ca(csr_signer, api_client):
    _key, request = nodecert.new_request("fleet", "signed-1")
    name = csr.submit(api_client, "signed-1-", request, nodecert.SIGNER, nodecert.USAGES, 600)
    raw = client.CustomObjectsApi(api_client).get_cluster_custom_object(
        csr.GROUP, csr.VERSION, csr.PLURAL, name
    )
    csr.approve(api_client, raw, "Test", "approved by the test")
    cert = csr.wait_certificate(api_client, name, 60)
    issued = nodecert.Issued.from_pem(cert)
    assert issued.common_name == "nodemanager:node:fleet:signed-1"
    assert issued.requested() == 600  # kube-controller-manager backdates notBefore 5 minutes
    ca = x509.load_pem_x509_certificate(csr_signer.ca.read_bytes())
    x509.load_pem_x509_certificate(cert).verify_directly_issued_by(ca)


def test_bootstrap_certificate_writes_a_kubeconfig_with_a_key_made_here(fleet, api_client):
    host = f"cert-{uuid.uuid4().hex[:6]}"
    boot = fleet.admit(host)
    done = fleet.bootstrap(host, boot, "--cert-ttl", "2h")
    assert done.returncode == 0, done.stderr
    assert "submitted CertificateSigningRequest nodemanager-" in done.stderr
    path = fleet.directory / f"{host}.kubeconfig"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p for p in path.parent.iterdir() if ".nm-tmp-" in p.name]  # no half-written file
    user = yaml.safe_load(path.read_text())["users"][0]["user"]
    pem = Path(user["client-certificate"])
    assert user["client-key"] == str(pem) == credential_path(str(path))
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(pem.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(pem.read_bytes())
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    me = f"nodemanager:node:{fleet.namespace}:{host}"
    assert whoami(str(path)) == me
    assert 2 * 3600 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()
    # The key never left the host: the request holds its public half only.
    [mine] = [r for r in requests(api_client) if r["spec"]["username"].endswith(host)]
    assert mine["spec"]["username"] == f"system:serviceaccount:{fleet.namespace}:nodemanager-{host}"
    assert conditions(mine)["Approved"] == "NodemanagerAutoApproved"
    assert b"PRIVATE" not in base64.b64decode(mine["spec"]["request"])
    # The controller records its Event after the approval went through, and the bootstrap may
    # be done (certificate issued) before that Event is written: wait for it.
    reasons = eventually(
        lambda: [
            e.reason for e in events_about(api_client, fleet.namespace, mine["metadata"]["name"])
        ],
        timeout=30,
        message="the approval's Event",
    )
    assert reasons == ["CertificateApproved"]
    # What the node may do, it may do as its certificate: write its own ManagedNode.
    node = client.CustomObjectsApi(config.new_client_from_config(str(path)))
    node.create_namespaced_custom_object(
        "common.nodemanager", "v1", fleet.namespace, "managednodes",
        {"apiVersion": "common.nodemanager/v1", "kind": "ManagedNode", "metadata": {"name": host}},
    )  # fmt: skip
    with pytest.raises(client.ApiException) as denied:
        node.create_namespaced_custom_object(
            "common.nodemanager", "v1", fleet.namespace, "managednodes",
            {"apiVersion": "common.nodemanager/v1", "kind": "ManagedNode",
             "metadata": {"name": f"{host}-impostor"}},
        )  # fmt: skip
    assert "only write the ManagedNode named after it" in denied.value.body


def issued_of(path: Path) -> nodecert.Issued:
    return nodecert.Issued.from_pem(Path(credential_path(str(path))).read_bytes())


def test_the_agent_renews_its_certificate_and_keeps_working(fleet, api_client, tmp_path):
    """Renewal without waiting 80% of ten minutes: the signer backdates notBefore by five
    minutes, so a 10-minute certificate spans 15 and --cert-renew-fraction 0.36 renews it
    about 5 to 24 s after it was issued (0.8 would be 7 minutes)."""
    host = f"renew-{uuid.uuid4().hex[:6]}"
    done = fleet.bootstrap(host, fleet.admit(host), "--cert-ttl", "10m")
    assert done.returncode == 0, done.stderr
    path = fleet.directory / f"{host}.kubeconfig"
    first = issued_of(path)
    create_secrets(client.CoreV1Api(api_client), fleet.namespace, f"{host}-secret")
    target = tmp_path / "renewed"
    put_configset(api_client, fleet.namespace, host, for_host(host, [
        {"path": str(target), "content": "before\n"},
        secret_file(str(tmp_path / "from-secret"), f"{host}-secret"),
    ]))  # fmt: skip
    scratch = tmp_path / "tmp"  # the agent's TMPDIR: no copy of a key may land there
    scratch.mkdir()
    agent = Agent(str(path), fleet.namespace, host, tmp_path / "state",
                  "--cert-renew-fraction", "0.36", env={"TMPDIR": str(scratch)})  # fmt: skip
    agent.start()
    try:
        applied(api_client, fleet.namespace, host, host)  # the Secret too: the controller
        assert target.read_text() == "before\n"  # granted it to the certificate's user
        serials = {first.serial}

        def renewed_twice():
            serials.add(issued_of(path).serial)
            return len(serials) >= 3

        eventually(renewed_twice, timeout=180, interval=1, message="two renewals")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not [p for p in path.parent.iterdir() if ".nm-tmp-" in p.name]
        assert whoami(str(path)) == f"nodemanager:node:{fleet.namespace}:{host}"
        renewals = [
            r for r in requests(api_client)
            if r["spec"]["username"] == f"nodemanager:node:{fleet.namespace}:{host}"
        ]  # fmt: skip
        assert len(renewals) >= 2  # each asked for with the certificate it replaced
        assert all(conditions(r).get("Approved") == "NodemanagerAutoApproved" for r in renewals)
        pid = agent.proc.pid
        put_configset(api_client, fleet.namespace, host, for_host(host, [
            {"path": str(target), "content": "after\n"},
            secret_file(str(tmp_path / "from-secret"), f"{host}-secret"),
        ]))  # fmt: skip
        eventually(lambda: target.read_text() == "after\n", timeout=60, message="applied after")
        assert agent.proc.pid == pid and agent.proc.poll() is None  # no restart
        keys = [f for f in scratch.rglob("*") if f.is_file() and b"PRIVATE KEY" in f.read_bytes()]
        assert keys == []
    finally:
        agent.stop()


def submit_as(kubeconfig: Path, host: str, usages=nodecert.USAGES, seconds: int = 3600) -> str:
    api = config.new_client_from_config(str(kubeconfig))
    try:
        request = nodecert.new_request(fleet_namespace(kubeconfig), host)[1]
        return csr.submit(api, f"{host}-forged-", request, nodecert.SIGNER, usages, seconds)
    finally:
        api.close()


def fleet_namespace(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["contexts"][0]["context"]["namespace"]


def left_pending(api_client, namespace: str, name: str) -> str:
    """The request's Event (the approver judged it) once it is there; the request unapproved."""

    def judged():
        events = events_about(api_client, namespace, name)
        assert len(events) == 1, events
        return events[0]

    event = eventually(judged, timeout=30, message=f"an Event about {name}")
    assert event.reason == "CertificateNotApproved" and event.type == "Warning"
    raw = client.CustomObjectsApi(api_client).get_cluster_custom_object(
        csr.GROUP, csr.VERSION, csr.PLURAL, name
    )
    assert conditions(raw) == {} and not (raw.get("status") or {}).get("certificate")
    return event.message


def test_a_request_for_another_node_is_left_for_an_administrator(fleet, api_client):
    mine, other = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("forger", "victim"))
    boot = fleet.admit(mine)
    fleet.admit(other)
    by_token = submit_as(boot, other)
    assert f"neither node {other}'s ServiceAccount nor the node" in left_pending(
        api_client, fleet.namespace, by_token
    )
    done = fleet.bootstrap(mine, boot, "--cert-ttl", "1h")
    assert done.returncode == 0, done.stderr
    by_certificate = submit_as(fleet.directory / f"{mine}.kubeconfig", other)
    assert f"neither node {other}'s ServiceAccount nor the node" in left_pending(
        api_client, fleet.namespace, by_certificate
    )


def test_extra_usages_or_a_longer_lifetime_are_left_for_an_administrator(fleet, api_client):
    host = f"greedy-{uuid.uuid4().hex[:6]}"
    boot = fleet.admit(host)
    server_too = submit_as(boot, host, usages=[*nodecert.USAGES, "server auth"])
    assert "usages" in left_pending(api_client, fleet.namespace, server_too)
    a_month = submit_as(boot, host, seconds=30 * 86400)
    assert "expirationSeconds 2592000 is not between 600 and 604800" in left_pending(
        api_client, fleet.namespace, a_month
    )


def test_revoke_ends_a_valid_certificates_access_at_once(fleet, api_client):
    host = f"revoked-{uuid.uuid4().hex[:6]}"
    done = fleet.bootstrap(host, fleet.admit(host), "--cert-ttl", "1h")
    assert done.returncode == 0, done.stderr
    path = fleet.directory / f"{host}.kubeconfig"
    node = config.new_client_from_config(str(path))
    core, custom = client.CoreV1Api(node), client.CustomObjectsApi(node)
    secret = f"{host}-secret"
    create_secrets(client.CoreV1Api(api_client), fleet.namespace, secret)
    client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, fleet.namespace, "managednodes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode",
         "metadata": {"name": host, "labels": {"kubernetes.io/hostname": host}}},
    )  # fmt: skip
    put_configset(api_client, fleet.namespace, host,
                  for_host(host, [secret_file("/etc/x", secret)]))  # fmt: skip
    eventually(lambda: can_read(core, fleet.namespace, secret), timeout=30,
               message="the controller grants the certificate its Secret")  # fmt: skip

    out = nm("revoke", "--hostname", host, "--kubeconfig", fleet.admin,
             "--namespace", fleet.namespace)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"took node {host}'s certificate out of RoleBinding" in out.stderr
    # At once, though the certificate is valid for another hour: no grant is left.
    assert issued_of(path).not_after > time.time() + 3000
    assert not can_read(core, fleet.namespace, secret)
    for call in (
        lambda: custom.list_namespaced_custom_object(GROUP, VERSION, fleet.namespace, "configsets"),
        lambda: submit_as(path, host),  # not even a renewal
    ):
        with pytest.raises((client.ApiException, KubeError)) as denied:
            call()
        assert denied.value.status == 403
    # The controller does not put the certificate back into the Secret's binding.
    refs = client.RbacAuthorizationV1Api(api_client).read_namespaced_role_binding(
        f"nodemanager-refs-{host}", fleet.namespace
    )
    assert [s.kind for s in refs.subjects] == ["ServiceAccount"]
    node.close()


def test_unapproved_bootstrap_gives_up_in_one_line_and_writes_nothing(fleet, api_client):
    """An administrator's credential is no node's bootstrap identity: the controller leaves
    the request to an administrator, and `bootstrap` stops at --approval-timeout."""
    host = f"waiting-{uuid.uuid4().hex[:6]}"
    fleet.admit(host)
    done = fleet.bootstrap(host, Path(fleet.admin), "--approval-timeout", "5s")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and "kubectl certificate approve nodemanager-" in last
    assert not (fleet.directory / f"{host}.kubeconfig").exists()
    assert not Path(credential_path(str(fleet.directory / f"{host}.kubeconfig"))).exists()
    name = last.split("kubectl certificate approve ")[1].rstrip(")")
    assert "neither node" in left_pending(api_client, fleet.namespace, name)


def test_a_nodes_requests_are_bounded_in_size_and_number(fleet, api_client):
    """Issue 37: 60 requests of 1.1 MB in 55 s stored 65 MB and doubled the controller. Now
    the admission policy refuses a node's request over 4096 bytes, only a node's newest
    pending request is kept, and the controller caches no one else's."""
    host = f"flood-{uuid.uuid4().hex[:6]}"
    boot = fleet.admit(host)
    node = config.new_client_from_config(str(boot))
    ns = fleet.namespace
    try:
        padded = b"x" * (1 << 20) + b"\n" + nodecert.new_request(ns, host)[1]
        with pytest.raises((client.ApiException, KubeError)) as refused:
            csr.submit(node, f"{host}-big-", padded, nodecert.SIGNER, nodecert.USAGES, 3600)
        assert refused.value.status in (403, 422)
        assert "at most 4096 bytes" in str(refused.value)
    finally:
        node.close()
    # Pending (a month is too long to approve): each newer one replaces the one before.
    # Created in one second, they are ordered by the version they were created at.
    names = [submit_as(boot, host, seconds=30 * 86400) for _ in range(3)]

    def only_newest():
        mine = {r["metadata"]["name"] for r in requests(api_client)}
        assert mine & set(names) == {names[-1]}, mine & set(names)
        return True

    eventually(only_newest, timeout=60, message="the older pending requests deleted")
    # Requests of other signers are not even listed by the controller: its memory stays flat.
    before = fleet.controller.rss_mb()
    admin = client.CertificatesV1Api(api_client)
    made = []
    try:
        for _ in range(20):
            body = client.V1CertificateSigningRequest(
                metadata=client.V1ObjectMeta(generate_name="other-signer-"),
                spec=client.V1CertificateSigningRequestSpec(
                    request=base64.b64encode(padded).decode(),
                    signer_name="example.com/other",
                    usages=["client auth"],
                ),
            )
            made.append(admin.create_certificate_signing_request(body).metadata.name)
        name = submit_as(boot, host, seconds=30 * 86400)  # one more of the node's: a sync ran
        eventually(lambda: events_about(api_client, ns, name), timeout=60, message="judged")
        grown = fleet.controller.rss_mb() - before
        assert grown < 12, f"controller RSS grew {grown:.0f} MB with 20 MB of other requests"
    finally:
        for n in made:
            admin.delete_certificate_signing_request(n)


def test_a_request_filed_before_revoke_is_not_approved_after_it(
    csr_signer, kubeconfig, api_client, tmp_path
):
    """The ServiceAccount files a request while the controller is down; `revoke` runs; the
    controller comes back. The SubjectAccessReview asked about the ServiceAccount, whose
    binding revoke keeps, and approved it (issue 37). Now the certificate user is asked too."""
    namespace = f"nm-revoke-{uuid.uuid4().hex[:6]}"
    kubectl_apply(kubeconfig, nm("rbac", "--shared", "--namespace", namespace).stdout)
    host = f"gone-{uuid.uuid4().hex[:6]}"
    out = nm("rbac", "--hostname", host, "--namespace", namespace, "--certificate")
    assert out.returncode == 0, out.stderr
    kubectl_apply(kubeconfig, out.stdout)
    boot = tmp_path / "boot.kubeconfig"
    issued = nm(
        "token", "--hostname", host, "--kubeconfig", kubeconfig,
        "--namespace", namespace, "--ttl", "10m", "--out", str(boot),
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    name = submit_as(boot, host)  # exactly what the node may have
    out = nm("revoke", "--hostname", host, "--kubeconfig", kubeconfig, "--namespace", namespace)
    assert out.returncode == 0, out.stderr
    own = shipped_kubeconfig(kubeconfig, namespace, tmp_path)
    controller = ControllerProcess(
        own, namespace, tmp_path, "--sync-period", "1s", "--approve-node-certificates"
    ).start()
    try:
        eventually(controller.leading, timeout=120, message="controller ready")
        message = left_pending(api_client, namespace, name)
        assert f"no longer holds node {host}'s grant" in message
    finally:
        assert controller.stop() == 0
