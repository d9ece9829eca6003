"""Names that cannot collide and Leases that cannot be kept (issue 27 items 3 and 10), tried
with a node's own credential.

A node named ``nodemanager-controller`` held the fleet controller's election Lease as its
liveness Lease and the controller never led. `rbac` refuses such names (tests/unit/bootstrap);
here the admission policy refuses the Lease itself, for a node onboarded by hand.
"""

from __future__ import annotations

import datetime as dt

import pytest
from kubernetes import client

from nodemanager.bootstrap.policy import RESERVED_NAMES
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.locks import GroupLock
from tests.cluster.helpers import eventually
from tests.cluster.test_isolation import cluster, refused  # noqa: F401

pytestmark = pytest.mark.cluster
RBAC_GROUP = "rbac.authorization.k8s.io"


def lease(c, name: str, holder: str) -> object:
    now = dt.datetime.now(dt.UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1LeaseSpec(
            holder_identity=holder, lease_duration_seconds=15, acquire_time=now, renew_time=now
        ),
    )
    return client.CoordinationV1Api(c.a).create_namespaced_lease(c.ns, body)


@pytest.fixture(scope="module")
def hand_made_create(cluster):  # noqa: F811
    """RBAC as an older `rbac` output or a hand-made Role gave it: create on any Lease name.
    What is left to refuse reserved names is the admission policy."""
    rbac = client.RbacAuthorizationV1Api(cluster.admin)
    name, account, ns = "hand-made-lease-create", "nodemanager-a", cluster.ns
    rbac.create_namespaced_role(
        cluster.ns,
        client.V1Role(
            metadata=client.V1ObjectMeta(name=name),
            rules=[
                client.V1PolicyRule(
                    api_groups=["coordination.k8s.io"], resources=["leases"], verbs=["create"]
                )
            ],
        ),
    )
    rbac.create_namespaced_role_binding(
        cluster.ns,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name=name),
            role_ref=client.V1RoleRef(api_group=RBAC_GROUP, kind="Role", name=name),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name=account, namespace=ns)],
        ),
    )
    eventually(lambda: not refused(lambda: lease(cluster, "hand-made-probe", "a")), timeout=30)
    yield
    rbac.delete_namespaced_role_binding(name, cluster.ns)
    rbac.delete_namespaced_role(name, cluster.ns)


@pytest.mark.parametrize("name", [*RESERVED_NAMES, "nodemanager-anything"])
def test_a_node_cannot_take_a_reserved_lease_name(cluster, hand_made_create, name):  # noqa: F811
    assert refused(lambda: lease(cluster, name, "a"), "reserved")


def test_a_node_still_holds_its_own_lease(cluster):  # noqa: F811
    api = client.CoordinationV1Api(cluster.a)
    own = api.read_namespaced_lease("a", cluster.ns)  # made by its rbac output
    now = dt.datetime.now(dt.UTC)
    own.spec = client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=40, renew_time=now)
    api.replace_namespaced_lease("a", cluster.ns, own)


def test_a_node_cannot_hold_a_lease_for_68_years(cluster, hand_made_create):  # noqa: F811
    now = dt.datetime.now(dt.UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="upgrades-68y"),
        spec=client.V1LeaseSpec(
            holder_identity="a", lease_duration_seconds=68 * 365 * 86400, renew_time=now
        ),
    )
    api = client.CoordinationV1Api(cluster.a)
    assert refused(lambda: api.create_namespaced_lease(cluster.ns, body), "at most 1800 s")


def test_a_renew_time_in_2099_is_stale_once_unchanged_for_its_duration(cluster):  # noqa: F811
    """Takers judge by how long they saw the Lease unchanged, not by its renewTime (written
    here by an administrator, and taken with one: the taker's judgement is what is tried)."""
    far = dt.datetime(2099, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)  # MicroTime: microseconds
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="group-2099"),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=2, renew_time=far),
    )
    client.CoordinationV1Api(cluster.admin).create_namespaced_lease(cluster.ns, body)
    lock = GroupLock(ClientFactory(cluster.kubeconfig), cluster.ns, "b")
    assert lock.try_acquire("group-2099") == "a"  # first seen now: held for its duration
    eventually(lambda: lock.try_acquire("group-2099") is None, timeout=30, interval=0.5)
    lease = client.CoordinationV1Api(cluster.admin).read_namespaced_lease("group-2099", cluster.ns)
    assert lease.spec.holder_identity == "b"
