"""The wanted status is a pure function of the outcome: computing it twice writes nothing."""

from nodemanager.agent.status import changed, compute, differs
from nodemanager.executor.summary import ConfigSetResult, Failure


def status(results, previous, now):
    return compute(
        observed={"release": "Debian 12"},
        agent_version="t",
        outcomes=results,
        previous=previous,
        generation=2,
        now=now,
    )


def test_same_outcome_same_status_and_transitions_keep_their_time():
    ok = [ConfigSetResult("a", "1", 1, last_applied="t0")]
    first = status(ok, {}, "t1")
    second = status(ok, first, "t2")
    assert not differs(second, first)
    ready = {c["type"]: c for c in second["conditions"]}["Ready"]
    assert ready["status"] == "True" and ready["lastTransitionTime"] == "t1"
    failed = [ConfigSetResult("a", "1", 1, failures=[Failure("file:/x", "denied")])]
    third = status(failed, second, "t3")
    conditions = {c["type"]: c for c in third["conditions"]}
    assert conditions["Ready"]["lastTransitionTime"] == "t3"
    assert conditions["Degraded"]["message"] == "a: file:/x: denied"
    assert third["configsets"] == [
        {"name": "a", "resourceVersion": "1", "generation": 1, "error": "file:/x: denied"}
    ]


def test_the_patch_carries_only_what_changed():
    """A ConfigSet change patches ``configsets`` alone; host facts and conditions that are
    already stored are not sent again, and a key to remove is sent as None."""
    ok = [ConfigSetResult("a", "1", 1, last_applied="t0")]
    stored = {**status(ok, {}, "t1"), "fileBackups": {"/etc/old": "abc"}}
    newer = [ConfigSetResult("a", "2", 2, last_applied="t5")]
    wanted = status(newer, stored, "t5")
    assert changed(wanted, stored) == {"configsets": wanted["configsets"]}
    assert changed({**wanted, "fileBackups": None}, stored) == {
        "configsets": wanted["configsets"],
        "fileBackups": None,
    }
    assert changed(stored, stored) == {} and not differs(stored, stored)


def test_the_controllers_pool_conflict_condition_is_carried_over_and_nothing_else_foreign():
    conflict = {"type": "PoolConflict", "status": "True", "reason": "SelectedByTwoPools"}
    previous = {"conditions": [conflict, {"type": "Stray", "status": "True"}]}
    types = [c["type"] for c in status([], previous, "t1")["conditions"]]
    assert "PoolConflict" in types and "Stray" not in types
    assert "PoolConflict" not in [c["type"] for c in status([], {}, "t1")["conditions"]]
