"""Stale nodes: Ready=Unknown only after a lease duration without renewal, written once."""

from __future__ import annotations

from nodemanager.controller.liveness import REASON, expired, renew_time, renewed, stale_conditions

LEASE = {"spec": {"renewTime": "2026-01-01T00:00:00Z", "leaseDurationSeconds": 40}}


def test_a_lease_is_live_for_its_duration_on_the_controllers_clock():
    assert expired(LEASE, 39.0) is None
    message = expired(LEASE, 41.0)
    assert message and "2026-01-01T00:00:00Z" in message


def test_a_node_without_lease_gets_the_default_duration():
    assert expired(None, 30.0) is None
    assert "not written a Lease" in (expired(None, 41.0) or "")


def test_ready_becomes_unknown_and_other_conditions_stay():
    node = {
        "metadata": {"generation": 3},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "Reconciled",
                    "observedGeneration": 3,
                },
                {"type": "Applied", "status": "True", "reason": "Applied"},
            ]
        },
    }
    conditions = stale_conditions(node, "gone", "2026-01-01T00:01:00Z")
    assert conditions is not None
    by = {c["type"]: c for c in conditions}
    assert by["Ready"]["status"] == "Unknown" and by["Ready"]["reason"] == REASON
    assert by["Ready"]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert by["Applied"] == node["status"]["conditions"][1]
    # Already Unknown: nothing to write.
    assert stale_conditions({"status": {"conditions": conditions}}, "gone", "later") is None


def test_a_node_that_never_reported_gets_a_ready_condition():
    conditions = stale_conditions({"metadata": {}}, "gone", "t")
    assert conditions == [
        {
            "type": "Ready",
            "status": "Unknown",
            "reason": REASON,
            "message": "gone",
            "observedGeneration": 0,
            "lastTransitionTime": "t",
        }
    ]


def test_a_lease_read_now_counts_as_renewed_only_when_its_renew_time_moved():
    recorded = renew_time(LEASE)
    assert recorded == "2026-01-01T00:00:00Z" and renew_time(None) == ""
    assert not renewed(LEASE, recorded)
    assert not renewed(None, recorded)  # deleted: the agent is gone
    later = {"spec": {**LEASE["spec"], "renewTime": "2026-01-01T00:00:30Z"}}
    assert renewed(later, recorded)
    assert renewed(LEASE, "")  # a Lease the cache had not shown at all


def test_only_a_lease_its_node_holds_counts_for_it():
    """A group Lease named like a host (rbac --lease-groups db-1 for web-1) proves nothing
    about db-1 (issue 37)."""
    from nodemanager.controller.liveness import own_lease

    held = {"spec": {**LEASE["spec"], "holderIdentity": "db-1"}}
    group = {"spec": {**LEASE["spec"], "holderIdentity": "web-1"}}
    assert own_lease(held, "db-1") is held
    assert own_lease(group, "db-1") is None and own_lease(None, "db-1") is None
    assert own_lease(LEASE, "db-1") is None  # released: no holder
