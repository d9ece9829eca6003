"""The ManagedNode status as the controller reads it: typed, and one bad node skips only itself."""

from __future__ import annotations

from nodemanager.api.nodereport import ConfigSetEntry, Problem, parse_report, set_condition
from nodemanager.controller.summary import NodeView, configset_status


def raw(name, *entries, conditions=()):
    return {
        "metadata": {"name": name, "labels": {"role": "web"}},
        "status": {"configsets": list(entries), "conditions": list(conditions)},
    }


def good(**over):
    return {"name": "web", "generation": 2, "revision": "web-abc", **over}


def test_a_good_entry_is_typed():
    r = parse_report(
        raw(
            "a",
            good(lastApplied="2026-01-01T00:00:00Z", conflicts=["x", "y"]),
            conditions=[{"type": "Ready", "status": "True", "reason": "Applied"}],
        )
    )
    e = r.entries["web"]
    assert (e.generation, e.revision, e.error, e.conflicts) == (2, "web-abc", "", ("x", "y"))
    assert r.condition("Ready") == "True" and r.condition("MemoryPressure") == ""
    assert r.problems == ()


def test_each_bad_field_is_named_and_only_its_entry_dropped():
    cases = {
        "lastApplied": good(lastApplied="2030-01-01t00:00:00z"),
        "revision": good(revision="web-abc\nadmin: true"),
        "generation": good(generation="2"),
        "error": good(error="a\u2028b"),
        "conflicts[1]": good(conflicts=["x", "y\nz"]),
        "resourceVersion": good(resourceVersion=["1"]),
    }
    for field, entry in cases.items():
        r = parse_report(raw("evil", entry, {"name": "db", "generation": 1}))
        assert r.problems == (Problem("evil", f"status.configsets[0].{field}"),), field
        assert list(r.entries) == ["db"]


def test_a_bad_node_does_not_fail_the_summary_of_the_others():
    cs = {
        "metadata": {"name": "web", "generation": 2},
        "spec": {"selector": {"matchLabels": {"role": "web"}}},
        "status": {},
    }
    nodes = [
        NodeView.from_dict(raw("evil", good(lastApplied="2030-01-01t00:00:00z"))),
        NodeView.from_dict(raw("ok", good())),
    ]
    status = configset_status(cs, nodes, now="2026-01-01T00:00:00Z")
    assert (status["matched"], status["updated"], status["pending"]) == (2, 1, 1)


def test_set_condition_keeps_the_transition_time_while_the_status_holds():
    first = set_condition(None, {"type": "Updated", "status": "False", "reason": "A"}, "t1")
    same = set_condition(first, {"type": "Updated", "status": "False", "reason": "B"}, "t2")
    flipped = set_condition(same, {"type": "Updated", "status": "True", "reason": "C"}, "t3")
    assert [c["lastTransitionTime"] for c in (*first, *same, *flipped)] == ["t1", "t1", "t3"]
    assert same[0]["reason"] == "B" and len(flipped) == 1


def test_what_the_agent_writes_is_what_the_controller_reads():
    written = ConfigSetEntry(
        "web", 3, "web-abc", "", "2026-01-01T00:00:00Z", ("file:/a",), resource_version="7"
    )
    raw_entry = written.to_raw()
    assert list(raw_entry) == [
        "name", "resourceVersion", "generation", "lastApplied", "error", "conflicts", "revision"
    ]  # fmt: skip
    assert parse_report(raw("a", raw_entry)).entries["web"] == written
    assert ConfigSetEntry("b").to_raw() == {
        "name": "b", "resourceVersion": "", "generation": 0, "error": ""
    }  # fmt: skip


def test_set_condition_carries_the_time_from_the_status_last_written():
    written = [{"type": "Ready", "status": "True", "lastTransitionTime": "t1"}]
    building = [{"type": "Applied", "status": "True", "lastTransitionTime": "t0"}]
    new = {"type": "Ready", "status": "True", "reason": "Reconciled"}
    out = set_condition(building, new, "t2", previous=written)
    assert out == [building[0], {**new, "lastTransitionTime": "t1"}]
    flipped = set_condition(building, {**new, "status": "False"}, "t2", previous=written)
    assert flipped[1]["lastTransitionTime"] == "t2"
