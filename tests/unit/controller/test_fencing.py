"""The controller's fencing decision (pure): opted in, armed, not in maintenance, and the Lease
seen unchanged for its duration plus the fencing timeout on the controller's clock."""

from __future__ import annotations

from typing import Any

import pytest

from nodemanager.api.fencing import ARMED, MAINTENANCE, Fencing
from nodemanager.api.nodereport import FencingStatus, parse_report
from nodemanager.controller.fencing import due

LEASE = {"spec": {"renewTime": "2026-01-01T00:00:00.000000Z", "leaseDurationSeconds": 40}}


def node(fencing: Any = None, armed: Any = True, annotations: Any = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", **({"annotations": annotations} if annotations else {})},
        "spec": {"fencing": fencing} if fencing is not None else {},
        "status": {"fencing": {"armed": armed}},
    }


ON = {"enabled": True, "timeoutSeconds": 30}


def test_due_once_the_lease_is_unchanged_for_its_duration_plus_the_timeout():
    assert due(node(ON), LEASE, 70) == ""  # 40 + 30: not past it yet
    why = due(node(ON), LEASE, 70.5)
    assert "lease 40 s + fencing timeout 30 s" in why and "2026-01-01T00:00:00" in why


def test_the_default_timeout_is_60_seconds():
    assert Fencing.of(node({"enabled": True})) == Fencing(True, 60)
    assert due(node({"enabled": True}), LEASE, 100) == ""
    assert due(node({"enabled": True}), LEASE, 101)


@pytest.mark.parametrize(
    "n, lease",
    [
        (node(None), LEASE),  # not opted in
        (node({"enabled": False, "timeoutSeconds": 30}), LEASE),
        (node(ON, armed=False), LEASE),  # its watchdog never armed: the host may be running
        (node(ON, armed="true"), LEASE),  # only a real boolean counts
        (node(ON, annotations={MAINTENANCE: ""}), LEASE),  # maintenance, any value
        (node(ON), None),  # no Lease at all: nothing ever renewed
        (node({"enabled": True, "timeoutSeconds": 5}), LEASE),  # below the CRD's minimum
        (node({"enabled": True, "timeoutSeconds": "30"}), LEASE),  # an older CRD let it in
        (node({"enabled": "yes"}), LEASE),
    ],
    ids=[
        "not-opted-in", "disabled", "not-armed", "armed-not-bool", "maintenance", "no-lease",
        "timeout-below-minimum", "timeout-a-string", "enabled-not-bool",
    ],
)  # fmt: skip
def test_never_due(n, lease):
    assert due(n, lease, 10_000) == ""


def test_the_pools_fencing_counts_unless_the_node_sets_its_own():
    pooled = {**node(), "spec": {"poolFencing": ON}}
    assert Fencing.of(pooled) == Fencing(True, 30)
    assert due(pooled, LEASE, 71)
    opted_out = {**node(), "spec": {"poolFencing": ON, "fencing": {"enabled": False}}}
    assert Fencing.of(opted_out) == Fencing() and due(opted_out, LEASE, 10_000) == ""
    longer = {**node(), "spec": {"poolFencing": ON, "fencing": {"enabled": True}}}
    assert Fencing.of(longer) == Fencing(True, 60)
    broken = {**node(), "spec": {"poolFencing": ON, "fencing": {"enabled": "yes"}}}
    assert Fencing.of(broken) == Fencing()  # malformed own setting: off, not the pool's


def test_status_fencing_round_trips_and_odd_values_read_as_unknown():
    written = FencingStatus(True, ARMED, 20)
    parsed = parse_report({"metadata": {"name": "n1"}, "status": {"fencing": written.to_raw()}})
    assert parsed.fencing == written and parsed.armed
    odd = {"armed": True, "reason": "Pwned\n", "deviceTimeoutSeconds": -1}
    parsed = parse_report({"metadata": {"name": "n1"}, "status": {"fencing": odd}})
    assert parsed.fencing == FencingStatus(True, "", 0)
    assert parse_report({"metadata": {"name": "n1"}, "status": {"fencing": []}}).fencing is None
