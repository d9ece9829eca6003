"""The rollout planner: admissions at most maxUnavailable at a time, failures halt, undo."""

from __future__ import annotations

import datetime as dt

import pytest

from nodemanager.controller.rollout import (
    NodeState,
    Rollout,
    plan,
    progress,
    revision_name,
    undo_target,
)

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def at(name, admitted, reported=None, error="", ready_since="2026-01-01T11:00:00Z", **kw):
    return NodeState(name, admitted, reported, error, ready_since, **kw)


def test_revision_names_ignore_rollout_steering_and_follow_content():
    a = revision_name("web", {"files": [{"path": "/x"}], "rollout": {"maxUnavailable": 1}})
    b = revision_name("web", {"files": [{"path": "/x"}], "paused": True})
    c = revision_name("web", {"files": [{"path": "/y"}]})
    assert a == b != c and a.startswith("web-")


def test_one_node_at_a_time_and_the_next_after_it_reports():
    nodes = [at(f"n{i}", "r1", "r1") for i in range(4)]
    p = plan("r2", Rollout(1), nodes, paused=False, now=NOW)
    assert p.admit == ["n0"] and p.waiting == ["n1", "n2", "n3"]
    nodes[0] = at("n0", "r2", "r1")  # admitted, not reported yet: still unavailable
    assert plan("r2", Rollout(1), nodes, paused=False, now=NOW).admit == []
    nodes[0] = at("n0", "r2", "r2")
    p = plan("r2", Rollout(1), nodes, paused=False, now=NOW)
    assert p.admit == ["n1"] and p.updated == ["n0"]


def test_percentages_round_down_but_never_below_one():
    assert Rollout("50%").budget(5) == 2
    assert Rollout("10%").budget(5) == 1
    assert Rollout(3).budget(5) == 3


def test_new_nodes_get_the_current_revision_at_once():
    nodes = [at("new-a", None, fresh=True), at("new-b", None, fresh=True), at("old", "r1", "r1")]
    p = plan("r2", Rollout(1), nodes, paused=False, now=NOW)
    assert p.admit == ["new-a", "new-b"] and p.waiting == ["old"]


def test_existing_nodes_without_admission_go_through_the_budget():
    # A ConfigSet created (or re-created, or given spec.rollout) over nodes already running.
    nodes = [at(f"n{i}", None, "r0") for i in range(4)]
    p = plan("r1", Rollout(1), nodes, paused=False, now=NOW)
    assert p.admit == ["n0"] and p.waiting == ["n1", "n2", "n3"]
    # A node that starts matching while paused or halted gets nothing new.
    p = plan("r1", Rollout(1), nodes, paused=True, now=NOW)
    assert p.admit == [] and len(p.waiting) == 4
    halted = [at("bad", "r1", "r1", error="boom"), at("joined", None)]
    p = plan("r1", Rollout(3), halted, paused=False, now=NOW)
    assert p.halted_by_failure and p.admit == [] and p.waiting == ["joined"]


def test_a_failure_halts_admissions_and_undo_readmits_the_failed_node_first():
    nodes = [at("n0", "r2", "r2", error="boom"), at("n1", "r1", "r1"), at("n2", "r1", "r1")]
    p = plan("r2", Rollout(3), nodes, paused=False, now=NOW)
    assert p.failed == ["n0"] and p.halted_by_failure and p.admit == []
    # Going back to r1: the broken node moves back at once; the others are already there.
    p = plan("r1", Rollout(1), nodes, paused=False, now=NOW)
    assert p.admit == ["n0"] and sorted(p.updated) == ["n1", "n2"]
    # Without pauseOnFailure the failed node only uses up the budget.
    p = plan("r2", Rollout(2, pause_on_failure=False), nodes, paused=False, now=NOW)
    assert not p.halted_by_failure and p.admit == ["n1"]


def test_paused_admits_no_existing_node():
    nodes = [at("n0", "r1", "r1"), at("n1", None, fresh=True)]
    p = plan("r2", Rollout(5), nodes, paused=True, now=NOW)
    assert p.admit == ["n1"] and p.waiting == ["n0"]


def test_min_ready_seconds_keep_a_node_unavailable():
    nodes = [at("n0", "r2", "r2", ready_since="2026-01-01T11:59:50Z"), at("n1", "r1", "r1")]
    p = plan("r2", Rollout(1, min_ready_seconds=30), nodes, paused=False, now=NOW)
    assert p.updated == [] and p.admit == []
    p = plan("r2", Rollout(1, min_ready_seconds=5), nodes, paused=False, now=NOW)
    assert p.updated == ["n0"] and p.admit == ["n1"]


def rev(name, number):
    return {"metadata": {"name": name}, "revision": number}


def test_undo_goes_to_the_previous_revision_or_the_one_asked_for():
    revisions = [rev("a", 1), rev("b", 2), rev("c", 3)]
    assert undo_target(revisions, "c")["metadata"]["name"] == "b"
    assert undo_target(revisions, "c", 1)["metadata"]["name"] == "a"
    with pytest.raises(ValueError, match="revision 7"):
        undo_target(revisions, "c", 7)
    with pytest.raises(ValueError, match="no rollout history"):
        undo_target([rev("a", 1)], "a")


def test_progress_words_follow_the_status():
    cs = {"metadata": {"name": "web", "generation": 2}, "status": {"observedGeneration": 1}}
    assert progress(cs)[0] == "waiting"
    cs["status"] = {"observedGeneration": 2, "matched": 3, "updated": 1, "pending": 2}
    assert progress(cs) == (
        "waiting",
        'Waiting for configset "web" rollout to finish: 1 of 3 updated nodes...',
    )
    cs["status"] = {"observedGeneration": 2, "matched": 3, "updated": 3, "pending": 0}
    assert progress(cs)[0] == "done"
    cs["status"]["conditions"] = [{"type": "Degraded", "status": "True", "message": "failed on n0"}]
    assert progress(cs) == ("failed", 'configset "web" rollout failed: failed on n0')
    # Past its deadline, as kubectl says of a Deployment; ahead of a pause it says why.
    stalled = {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": "no node updated for 600s; waiting for n2 (not ready)",
    }
    cs["status"] = {"observedGeneration": 2, "matched": 3, "updated": 1, "conditions": [stalled]}
    assert progress(cs) == (
        "failed",
        'configset "web" exceeded its progress deadline: '
        "no node updated for 600s; waiting for n2 (not ready)",
    )


class FakeFleet:
    """Records the controller's writes of ready times (the API's spec patch)."""

    def __init__(self):
        self.marks = []

    def mark_ready(self, node, field, configset, revision, since):
        self.marks.append((node, field, configset, revision, since))


def test_ready_time_is_the_controllers_first_sighting_and_read_back_from_spec():
    import datetime as dt

    from nodemanager.controller.staging import _Ready

    fleet = FakeFleet()
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    marked = {}
    ready = _Ready(fleet, "web", "r2", now, marked)
    node = {"metadata": {"name": "n0"}, "spec": {}}
    # The node's own lastApplied (an hour ahead, say) plays no part: the controller's clock.
    assert ready.since(node, "r2", "") == "2026-01-01T12:00:00Z"
    assert fleet.marks == [("n0", "configsetReadySince", "web", "r2", "2026-01-01T12:00:00Z")]
    # Only queued, never confirmed (the write failed): the next sync writes it again.
    later = _Ready(fleet, "web", "r2", now + dt.timedelta(seconds=30), marked)
    assert later.since(node, "r2", "") == "2026-01-01T12:00:30Z" and len(fleet.marks) == 2
    # Confirmed (configsets.Memory.applied), not in the cache yet: the same time, no write.
    marked[("web", "n0", "r2")] = "2026-01-01T12:00:30Z"
    later = _Ready(fleet, "web", "r2", now + dt.timedelta(seconds=60), marked)
    assert later.since(node, "r2", "") == "2026-01-01T12:00:30Z" and len(fleet.marks) == 2
    # After a controller restart (nothing in memory) the node's spec carries it.
    stored = {"configsetReadySince": {"web": {"revision": "r2", "since": "2026-01-01T11:00:00Z"}}}
    fresh = _Ready(fleet, "web", "r2", now, {})
    assert fresh.since({"metadata": {"name": "n0"}, "spec": stored}, "r2", "") == (
        "2026-01-01T11:00:00Z"
    )
    # Not applied, or applied with an error: no time, no write.
    assert fresh.since(node, "r2", "boom") is None and fresh.since(node, None, "") is None
    assert len(fleet.marks) == 2
    # r2, then r3 (both seen in the spec), then undo back to r2: recorded again, not taken
    # from the first write (the spec says r3, and pools read the spec).
    marked = {}
    ready = _Ready(fleet, "web", "r2", now, marked)
    ready.since(node, "r2", "")
    marked[("web", "n0", "r2")] = "2026-01-01T12:00:00Z"  # confirmed
    written = {"configsetReadySince": {"web": {"revision": "r2", "since": "2026-01-01T12:00:00Z"}}}
    ready.since({"metadata": {"name": "n0"}, "spec": written}, "r2", "")
    later = now + dt.timedelta(minutes=5)
    _Ready(fleet, "web", "r3", later, marked).since(node, "r3", "")
    marked[("web", "n0", "r3")] = "2026-01-01T12:05:00Z"  # confirmed
    on_r3 = {"configsetReadySince": {"web": {"revision": "r3", "since": "2026-01-01T12:05:00Z"}}}
    _Ready(fleet, "web", "r3", later, marked).since(
        {"metadata": {"name": "n0"}, "spec": on_r3}, "r3", ""
    )
    back = _Ready(fleet, "web", "r2", later, marked)
    assert (
        back.since({"metadata": {"name": "n0"}, "spec": on_r3}, "r2", "") == "2026-01-01T12:05:00Z"
    )
    assert fleet.marks[-1] == ("n0", "configsetReadySince", "web", "r2", "2026-01-01T12:05:00Z")


class PruneFleet:
    def __init__(self):
        self.removed = []

    def unadmit(self, node, fields, configset):
        self.removed.append((node, configset))


def test_admissions_of_gone_unstaged_or_unselected_configsets_are_pruned():
    from nodemanager.controller.staging import prune

    def cs(name, rollout=True, role="web"):
        spec = {"selector": {"matchLabels": {"role": role}}}
        return {
            "metadata": {"name": name},
            "spec": {**spec, **({"rollout": {}} if rollout else {})},
        }

    node = {
        "metadata": {"name": "n0", "labels": {"role": "web"}},
        "spec": {
            "configsetRevisions": {"kept": "r1", "gone": "r1", "plain": "r1", "other": "r1"},
            "configsetReadySince": {"gone": {"revision": "r1", "since": "t"}},
        },
    }
    fleet = PruneFleet()
    configsets = [cs("kept"), cs("plain", rollout=False), cs("other", role="db")]
    assert prune(fleet, configsets, [node]) == [("n0", "gone"), ("n0", "other"), ("n0", "plain")]
    assert fleet.removed == [("n0", "gone"), ("n0", "other"), ("n0", "plain")]


def test_a_node_not_ready_takes_a_slot_and_is_not_admitted():
    nodes = [
        at("dead", "r1", "r1", down=True),
        at("n1", "r1", "r1"),
        at("new", None, down=True, fresh=True),
    ]
    p = plan("r2", Rollout(2), nodes, paused=False, now=NOW)
    # Two slots: both taken by nodes that are not Ready, so nothing moves and it says who.
    assert p.down == ["dead", "new"] and p.admit == [] and p.waiting == ["n1"]
    assert sorted(p.unavailable) == ["dead", "new"]
    p = plan("r2", Rollout(3), nodes, paused=False, now=NOW)
    assert p.admit == ["n1"]


def test_history_keeps_the_newest_and_every_admitted_revision():
    from nodemanager.controller.rollout import expired

    revisions = {f"r{i}": i for i in range(1, 15)}
    assert expired(revisions, {"r14"}, 10) == ["r4", "r3", "r2", "r1"]
    assert expired(revisions, {"r14", "r2"}, 10) == ["r4", "r3", "r1"]
    assert expired({"r1": 1}, {"r1"}, 1) == []


def test_revisions_are_owned_with_controller_true():
    from nodemanager.controller.rollout import revision_object

    cs = {"metadata": {"name": "web", "uid": "u1"}, "spec": {"files": []}}
    (owner,) = revision_object(cs, "ns", 1)["metadata"]["ownerReferences"]
    assert owner["controller"] is True and owner["uid"] == "u1"
