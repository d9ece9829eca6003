"""Controller Events come from transitions of the status it writes, not from sync loops."""

from __future__ import annotations

from nodemanager.controller import events


def status(degraded="False", paused="False", paused_reason="NotPaused", progressing="False",
           reason="AllNodesReported", failed=0, **extra):  # fmt: skip
    return {
        "updateRevision": "web-abc",
        "revision": 3,
        "matched": 5,
        "failed": failed,
        **extra,
        "conditions": [
            {"type": "Degraded", "status": degraded, "message": "failed on n1"},
            {"type": "Paused", "status": paused, "reason": paused_reason, "message": "stopped"},
            {"type": "Progressing", "status": progressing, "reason": reason},
        ],
    }


def reasons(before, after):
    return [n.reason for n in events.transitions(before, after)]


def test_an_unchanged_status_says_nothing():
    s = status(degraded="True", paused="True", paused_reason="RolloutFailed", failed=1)
    assert events.transitions(s, s) == []


def test_failure_degrades_and_pauses_with_warnings():
    before = status(progressing="True", reason="NodesUpdating")
    after = status(
        degraded="True", paused="True", paused_reason="RolloutFailed", failed=1,
        reason="RolloutFailed",
    )  # fmt: skip
    notes = events.transitions(before, after)
    assert [n.reason for n in notes] == ["Degraded", "RolloutPausedOnFailure"]
    assert all(n.warning for n in notes)
    assert notes[0].message == "failed on n1" and notes[0].key == "web-abc"


def test_pause_resume_complete_and_recovery():
    assert reasons(status(), status(paused="True", paused_reason="Paused")) == ["RolloutPaused"]
    resumed = events.transitions(status(paused="True", paused_reason="Paused"), status())
    assert [n.reason for n in resumed] == ["RolloutResumed"]
    assert resumed[0].message.startswith("spec.paused cleared")
    after_failure = events.transitions(
        status(degraded="True", paused="True", paused_reason="RolloutFailed", failed=1),
        status(progressing="True", reason="NodesUpdating"),
    )
    assert [n.reason for n in after_failure] == ["Recovered", "RolloutResumed"]
    assert after_failure[1].message.startswith("no failure at the current revision")
    done = events.transitions(status(progressing="True", reason="NodesUpdating"), status())
    assert [n.reason for n in done] == ["RolloutComplete"]
    assert done[0].message == "revision 3 (web-abc) on all 5 matched nodes"


def test_admissions_of_one_revision_share_a_key_and_name_at_most_ten_nodes():
    a = events.admitted(2, "web-abc", ["n1"], 5, 1)
    b = events.admitted(2, "web-abc", ["n2"], 5, 2)
    assert (a.reason, a.key) == (b.reason, b.key) == ("NodesAdmitted", "web-abc")
    assert b.message == "admitted n2 to revision 2 (web-abc); 2 of 5 nodes admitted"
    many = events.admitted(2, "web-abc", [f"n{i}" for i in range(12)], 12, 12)
    assert "n9 and 2 more" in many.message and "n10" not in many.message
