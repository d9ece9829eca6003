"""Names that cannot collide (issue 27 item 3), tried with a node's own credential.

A node named ``nodemanager-controller`` held the fleet controller's election Lease as its
liveness Lease and the controller never led. `rbac` refuses such names (tests/unit/bootstrap);
here the admission policy refuses the Lease itself, for a node onboarded by hand.
"""

from __future__ import annotations

import datetime as dt

import pytest
from kubernetes import client

from nodemanager.bootstrap.policy import RESERVED_NAMES
from tests.cluster.test_isolation import cluster, refused  # noqa: F401

pytestmark = pytest.mark.cluster


def lease(c, name: str, holder: str) -> object:
    now = dt.datetime.now(dt.UTC)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1LeaseSpec(
            holder_identity=holder, lease_duration_seconds=15, acquire_time=now, renew_time=now
        ),
    )
    return client.CoordinationV1Api(c.a).create_namespaced_lease(c.ns, body)


@pytest.mark.parametrize("name", [*RESERVED_NAMES, "nodemanager-anything"])
def test_a_node_cannot_take_a_reserved_lease_name(cluster, name):  # noqa: F811
    assert refused(lambda: lease(cluster, name, "a"), "reserved")


def test_a_node_still_takes_its_own_and_a_group_lease(cluster):  # noqa: F811
    lease(cluster, "upgrades", "a")
    lease(cluster, "a", "a")
