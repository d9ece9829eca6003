"""The controller at rest writes nothing: 250 ManagedNodes (more than one sync's placements) and
their Leases written by the test as agents would, three NodePools (one fencing its nodes, two
selecting the same ten nodes), the real controller on its shipped credential. Counted from its
own metrics, every wait a condition.

- Each node's spec.pool (with spec.poolFencing where its pool fences) is written exactly once:
  a placement written and not yet shown by the controller's cache is not written again.
- Once placed, the spec as the API server stores it asks for nothing more: the controller's
  own placements() over the stored objects is empty, and three more syncs write nothing.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from nodemanager.api.pool import NodePool
from nodemanager.controller.pools import Budget, Member, placements
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.cluster.test_controller_scale import metrics
from tests.cluster.test_daemon import GROUP, VERSION

pytestmark = [pytest.mark.cluster]
NODES = 250  # PLACEMENTS_PER_SYNC is 200: placing them takes two syncs at least
FENCING = {"enabled": True, "timeoutSeconds": 90}
WRITES = "nodemanager_controller_writes_total"
REQUESTS = "nodemanager_controller_api_requests_total"


def labels(i: int) -> dict[str, str]:
    """Every third node in pool db (fenced); the first ten in db and edge (held)."""
    out = {"fleet": "rest"}
    if i % 3 == 0 or i < 10:
        out["tier"] = "db"
    if i < 10:
        out["zone"] = "edge"
    return out


def wanted(i: int) -> dict[str, Any]:
    if i < 10:
        return {"pool": ""}
    if i % 3 == 0:
        return {"pool": "db", "poolFencing": FENCING}
    return {"pool": "default"}


@pytest.fixture(scope="module")
def fleet(control_plane) -> Iterator[tuple[str, client.ApiClient]]:
    api = config.new_client_from_config(str(control_plane.kubeconfig))
    ns = f"rest-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
    )
    custom = client.CustomObjectsApi(api)
    for name, spec in [
        ("db", {"nodeSelector": {"matchLabels": {"tier": "db"}}, "fencing": FENCING}),
        ("edge", {"nodeSelector": {"matchLabels": {"zone": "edge"}}}),
    ]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NodePool", "metadata": {"name": name}}
        custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, "nodepools", {**body, "spec": spec}
        )
    renewed = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for i in range(NODES):
        name = f"rest-{i:03d}"
        node = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ManagedNode",
            "metadata": {"name": name, "labels": labels(i)},
            "spec": {},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, "managednodes", node)
        # Live for the whole test: no Ready=Unknown, no fencing to count.
        client.CoordinationV1Api(api).create_namespaced_lease(
            ns,
            {
                "metadata": {"name": name},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": 3600,
                    "renewTime": renewed,
                },
            },
        )
    yield ns, api
    api.close()


@pytest.fixture(scope="module")
def controller(control_plane, fleet, tmp_path_factory) -> Iterator[ControllerProcess]:
    ns = fleet[0]
    directory: Path = tmp_path_factory.mktemp("rest")
    own = shipped_kubeconfig(str(control_plane.kubeconfig), ns, directory)
    c = ControllerProcess(
        own, ns, directory, "--sync-period", "1s", "--manage-access", "false"
    ).start()
    eventually(c.leading, timeout=120, message="controller ready")
    yield c
    assert c.stop() == 0


def writes(m: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in m.items() if k.startswith(WRITES + "{")}


def test_placements_are_written_once_and_at_rest_nothing_is_written(fleet, controller):
    ns, api = fleet
    custom = client.CustomObjectsApi(api)

    def placed() -> bool:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "managednodes")["items"]
        specs = {n["metadata"]["name"]: n.get("spec") or {} for n in items}
        wrong = [i for i in range(NODES) if specs[f"rest-{i:03d}"] != wanted(i)]
        assert not wrong, [(i, specs[f"rest-{i:03d}"]) for i in wrong[:5]]
        return True

    eventually(placed, timeout=300, interval=2, message=f"{NODES} nodes placed")
    # What the server stored, read back as the controller reads its cache: nothing to write.
    # (A field it prunes or defaults would be written again and again.)
    raw_pools = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "nodepools")["items"]
    pools = [NodePool.from_dict(p) for p in raw_pools]
    items = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "managednodes")["items"]
    members = [Member.of(n) for n in items]
    budget, _ = Budget.of(pools, members, [], dt.datetime.now(dt.UTC))
    assert placements(members, budget.member, budget.conflicts, budget.pools) == []

    def quiet_over_syncs(n: int) -> tuple[dict[str, float], dict[str, float]]:
        """(metrics, metrics ``n`` syncs later)."""
        before = metrics(controller)
        syncs = "nodemanager_controller_syncs_total"
        after = eventually(
            lambda: (m := metrics(controller))[syncs] >= before[syncs] + n and m,
            timeout=120,
            interval=0.5,
        )
        return before, after

    # The pools' status and the two held nodes' PoolConflict settle too: wait until two
    # syncs in a row wrote nothing (never true for a controller that keeps writing).
    def settled() -> tuple[dict[str, float], dict[str, float]]:
        before, after = quiet_over_syncs(2)
        assert writes(after) == writes(before), (writes(before), writes(after))
        return before, after

    eventually(settled, timeout=240, interval=0, message="two syncs without a write")
    m = metrics(controller)
    assert m[f'{WRITES}{{kind="pool"}}'] == NODES  # once each: none repeated
    assert m.get(f'{WRITES}{{kind="pool_condition"}}') == 10  # PoolConflict on the held ones

    # At rest: three more syncs (a full resync each 5 s), no request that writes.
    before, after = quiet_over_syncs(3)
    assert writes(after) == writes(before)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        key = f'{REQUESTS}{{method="{method}"}}'
        assert after.get(key, 0) == before.get(key, 0), method
