"""What operators read: condition messages name the hosts they are about and why each waits,
the pool's UPDATING count agrees with its Updating condition, and NodePools get Events for
what their conditions say (issue 35)."""

from __future__ import annotations

from nodemanager.controller import events
from nodemanager.controller.configsets import Memory, reconcile
from nodemanager.controller.pools import Budget
from nodemanager.controller.poolstatus import counts, pool_status
from nodemanager.controller.rollout import REVISIONS_FIELD, revision_name
from nodemanager.controller.summary import NodeView
from tests.unit.controller.test_pools import NOW, STAMP, node, pool, staged
from tests.unit.controller.test_reconcile import NOW as STAMP_CS
from tests.unit.controller.test_reconcile import SETTINGS, configset
from tests.unit.controller.test_reconcile import node as raw_node


def conditions(status):
    return {c["type"]: c for c in status["conditions"]}


def test_a_staged_rollout_names_each_pending_host_and_why_it_waits():
    raw = configset("web", staged=True)
    target = revision_name("web", raw["spec"])
    old = {"name": "web", "generation": 1, "revision": "web-old", "error": ""}
    nodes = [raw_node(n, old, admitted={"web": "web-old"}) for n in ("a", "b", "c")]
    nodes[2]["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    revisions = [
        {"metadata": {"name": r, "labels": {"nodemanager.io/configset": "web"}}, "revision": i}
        for i, r in enumerate(["web-old", target], start=1)
    ]
    views = [NodeView.from_dict(n) for n in nodes]
    outcome = reconcile(raw, views, nodes, revisions, Memory(), SETTINGS, now=STAMP_CS, mono=1.0)
    (status,) = [e.args[1] for e in outcome.effects if e.method == "patch_configset_status"]
    message = conditions(status)["Progressing"]["message"]
    # c is not ready and holds the only slot: a waits for it, b too.
    assert message == (
        "3 of 3 nodes pending: a (waiting for maxUnavailable), "
        "b (waiting for maxUnavailable), c (not ready)"
    ), message


def test_a_paused_or_held_pool_is_named_as_the_reason():
    raw = configset("web", staged=True)
    web_pool = pool("web", paused=True)
    members = [node("a", {"role": "web", "pool": "web"}), node("b", {"role": "web", "pool": "web"})]
    two = node("c", {"role": "web", "pool": "web", "also": "x"})
    other = pool("other", nodeSelector={"matchLabels": {"also": "x"}})
    gate, _ = Budget.of([web_pool, other], [*members, two], [], NOW)
    nodes = [raw_node(n, {"name": "web", "generation": 0}) for n in ("a", "b", "c")]
    nodes[0]["metadata"]["labels"] = {"role": "web", "pool": "web"}
    nodes[1]["metadata"]["labels"] = {"role": "web", "pool": "web"}
    nodes[2]["metadata"]["labels"] = {"role": "web", "pool": "web", "also": "x"}
    views = [NodeView.from_dict(n) for n in nodes]
    outcome = reconcile(
        raw, views, nodes, [], Memory(), SETTINGS, now=STAMP_CS, mono=1.0, gate=gate
    )
    (status,) = [e.args[1] for e in outcome.effects if e.method == "patch_configset_status"]
    message = conditions(status)["Progressing"]["message"]
    assert "a (pool web paused)" in message and "b (pool web paused)" in message, message
    assert "c (selected by two pools)" in message, message


def test_pool_updating_agrees_with_its_count_and_never_lists_nobody():
    one, _ = staged("one")
    good = {"name": "one", "generation": 1, "revision": one.revision}
    admitted = {REVISIONS_FIELD: {"one": one.revision}}
    default = pool("default")
    # Every member updated, one more node held by two pools: named, not an empty list.
    members = [node("a", spec=admitted, entries=[good])]
    b, why = Budget.of([default], members, [one], NOW)
    c = counts(default, members, b, why, [one])
    c = type(c)(**{**c.__dict__, "conflicting": ["z"]})
    s = pool_status({}, default, c, 1, STAMP)
    conds = conditions(s)
    assert conds["Updated"]["status"] == "False"
    assert (
        conds["Updated"]["message"] == "1 of 1 nodes updated; waiting for z (selected by two pools)"
    )
    assert "waiting for ," not in str(conds) and not str(conds).count("waiting for )")
    assert (conds["Updating"]["status"], s["updating"]) == ("False", 0)
    # A node being changed: Updating True and counted, its ConfigSet named.
    members = [node("a", spec=admitted, entries=[])]
    b, why = Budget.of([default], members, [one], NOW)
    s = pool_status({}, default, counts(default, members, b, why, [one]), 1, STAMP)
    conds = conditions(s)
    assert (conds["Updating"]["status"], s["updating"]) == ("True", 1)
    assert conds["Updating"]["message"] == "0 of 1 nodes updated; waiting for a (ConfigSet one)"
    # Only a node that is not ready: named with why, nothing counted as updating.
    members = [node("a", spec=admitted, entries=[], ready="Unknown")]
    b, why = Budget.of([default], members, [one], NOW)
    s = pool_status({}, default, counts(default, members, b, why, [one]), 1, STAMP)
    conds = conditions(s)
    assert (conds["Updating"]["status"], conds["Updating"]["reason"], s["updating"]) == (
        "False",
        "NodesWaiting",
        0,
    )
    assert "a (not ready)" in conds["Updating"]["message"]


def _pool_status(
    updating=("False", "AllNodesUpdated", "2 of 2 nodes updated"), degraded="", nodes=2
):
    conds = [
        {"type": "Updated", "status": "True" if updating[1] == "AllNodesUpdated" else "False",
         "reason": "x", "message": updating[2]},
        {"type": "Updating", "status": updating[0], "reason": updating[1], "message": updating[2]},
        {"type": "Degraded", "status": "True" if degraded else "False",
         "reason": "NodesDegraded" if degraded else "AsExpected", "message": degraded},
    ]  # fmt: skip
    return {"nodes": nodes, "conditions": conds}


def test_node_pools_get_events_for_what_their_conditions_say():
    def reasons(before, after):
        return [(n.reason, n.warning) for n in events.pool_transitions(before, after)]

    idle = _pool_status()
    busy = _pool_status(("True", "NodesUpdating", "0 of 2 nodes updated; waiting for a"))
    stalled = _pool_status(("False", "ProgressDeadlineExceeded", "no node updated for 5s; a"))
    paused = _pool_status(("False", "Paused", "spec.paused is set; 0 of 2 nodes updated"))
    assert reasons(idle, busy) == [("NodesUpdating", False)]
    assert reasons(busy, stalled) == [("ProgressDeadlineExceeded", True)]
    assert reasons(busy, paused) == [("PoolPaused", False)]
    assert reasons(paused, busy) == [("PoolResumed", False)]
    assert reasons(busy, idle) == [("PoolUpdated", False)]
    sick = _pool_status(degraded="degraded: a")
    sicker = _pool_status(degraded="degraded: a, b")
    assert reasons(idle, sick) == [("NodesDegraded", True)]
    assert reasons(sick, sicker) == [("NodesDegraded", True)]  # names the new one too
    assert reasons(sicker, idle) == [("Recovered", False)]
    assert reasons(idle, _pool_status(nodes=3)) == [("MembersChanged", False)]
    assert reasons(idle, idle) == []
    assert reasons({}, idle) == []  # the first status: nothing changed yet


def test_a_configsets_degraded_event_names_every_failed_host():
    def degraded(message):
        return {"conditions": [{"type": "Degraded", "status": "True", "message": message}]}

    first = events.transitions({}, degraded("failed on a"))
    more = events.transitions(degraded("failed on a"), degraded("failed on a, b"))
    same = events.transitions(degraded("failed on a, b"), degraded("failed on a, b"))
    assert [n.message for n in first + more] == ["failed on a", "failed on a, b"]
    assert same == []
