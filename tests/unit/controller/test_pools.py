"""Pools: membership, disruption read from the nodes, the shared budget, grants, pool status."""

from __future__ import annotations

import datetime as dt

import pytest

from nodemanager.api import InvalidObject
from nodemanager.api.maxunavailable import budget
from nodemanager.api.pool import NodePool
from nodemanager.controller.pools import Budget, Member, Target, assign, grants, placements
from nodemanager.controller.poolstatus import counts, pool_status
from nodemanager.controller.rollout import NodeState, Rollout, plan, revision_name

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
STAMP = "2026-01-01T12:00:00Z"


def node(name, labels=None, *, spec=None, entries=(), ready="True", request=None, degraded=False):
    status = {
        "configsets": [dict(e) for e in entries],
        "conditions": [
            {"type": "Ready", "status": ready},
            {"type": "Degraded", "status": "True" if degraded else "False"},
        ],
    }
    if request:
        status["disruption"] = {"id": request, "reason": "os upgrade"}
    raw = {
        "metadata": {"name": name, "labels": labels or {"role": "web"}},
        "spec": spec or {},
        "status": status,
    }
    return Member.of(raw)


def pool(name, max_unavailable=1, **kw):
    spec = {"maxUnavailable": max_unavailable, **kw}
    if name != "default":
        spec.setdefault("nodeSelector", {"matchLabels": {"pool": name}})
    return NodePool.from_dict({"metadata": {"name": name}, "spec": spec})


def staged(name, content="v1", min_ready=0):
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "rollout": {"maxUnavailable": 5, "minReadySeconds": min_ready},
        "files": [{"path": f"/{name}", "content": content}],
    }
    return Target.of({"metadata": {"name": name, "generation": 1}, "spec": spec}), spec


@pytest.mark.parametrize(
    ("value", "nodes", "want"),
    [
        (1, 10, 1),
        (3, 10, 3),
        ("25%", 10, 2),
        ("10%", 5, 1),
        ("0%", 4, 1),
        ("100%", 4, 4),
        (0, 3, 1),
    ],
)
def test_max_unavailable_as_a_count_rounds_down_and_is_at_least_one(value, nodes, want):
    assert budget(value, nodes) == want


def test_a_bad_max_unavailable_names_the_field():
    with pytest.raises(InvalidObject, match="spec.maxUnavailable"):
        NodePool.from_dict({"metadata": {"name": "x"}, "spec": {"maxUnavailable": "lots"}})


def test_every_node_in_exactly_one_pool_and_two_pools_is_a_conflict():
    pools = [pool("default"), pool("db"), pool("edge", nodeSelector={"matchLabels": {"zone": "e"}})]
    nodes = [
        node("a", {"pool": "db"}),
        node("b", {}),
        node("c", {"pool": "db", "zone": "e"}),
        node("d", {"zone": "e"}, spec={"pool": "edge"}),
    ]
    member, conflicts = assign(pools, nodes)
    assert member == {"a": "db", "b": "default", "d": "edge"}
    assert conflicts == {"c": ["db", "edge"]}
    # spec.pool is written where it differs; "" for the held node.
    by_name = {p.name: p for p in pools}
    assert placements(nodes, member, conflicts, by_name) == [
        ("a", {"pool": "db"}), ("b", {"pool": "default"}), ("c", {"pool": ""}),
    ]  # fmt: skip


def test_a_pools_fencing_is_copied_to_its_nodes_and_taken_back():
    on = {"enabled": True, "timeoutSeconds": 90}
    pools = {"default": pool("default"), "db": pool("db", fencing=on)}
    member, conflicts = {"a": "db", "b": "default", "d": "db"}, {"c": ["db", "edge"]}
    nodes = [
        node("a", spec={"pool": "db"}),
        node("b", spec={"pool": "default", "poolFencing": on}),  # moved out of db
        node("c", spec={"pool": "", "poolFencing": on}),  # now held: fenced on no guess
        node("d", spec={"pool": "db", "poolFencing": on, "fencing": {"enabled": False}}),
    ]
    assert placements(nodes, member, conflicts, pools) == [
        ("a", {"poolFencing": on}), ("b", {"poolFencing": None}), ("c", {"poolFencing": None}),
    ]  # fmt: skip
    assert pool("db", fencing={"enabled": True}).fencing.timeout_seconds == 60
    assert not pool("db", fencing={"enabled": False}).fencing.enabled
    with pytest.raises(InvalidObject, match="spec.fencing.timeoutSeconds"):
        pool("db", fencing={"enabled": True, "timeoutSeconds": 5})


def test_two_staged_configsets_share_one_slot_of_the_pool():
    (one, _), (two, _) = staged("one", "v2"), staged("two", "v2")
    nodes = [node(f"n{i}") for i in range(4)]
    b, why = Budget.of([pool("default")], nodes, [one, two], NOW)
    assert why == {} and b.limit("default") == 1
    old = [NodeState(f"n{i}", "r1", "r1", "", STAMP) for i in range(4)]
    first = plan(one.revision, Rollout(5), old, paused=False, now=NOW, gate=b)
    second = plan(two.revision, Rollout(5), old, paused=False, now=NOW, gate=b)
    # The ConfigSets allow 5 each; the pool allows one node: both changes go to that node.
    assert first.admit == ["n0"] and second.admit == ["n0"]


def test_a_node_changing_for_one_configset_blocks_the_pool_for_another():
    one, _ = staged("one", "v2")
    two, _ = staged("two", "v2")
    busy = node(
        "n0",
        spec={"configsetRevisions": {"one": one.revision}},
        entries=[{"name": "one", "generation": 1, "revision": "old"}],
    )
    nodes = [busy, *(node(f"n{i}") for i in (1, 2))]
    b, why = Budget.of([pool("default")], nodes, [one, two], NOW)
    assert why == {"n0": "ConfigSet one"}
    states = [NodeState(f"n{i}", "r1", "r1", "", STAMP) for i in (1, 2)]
    assert plan(two.revision, Rollout(5), states, paused=False, now=NOW, gate=b).admit == []
    # With two slots, one more node goes.
    b, _ = Budget.of([pool("default", 2)], nodes, [one, two], NOW)
    assert plan(two.revision, Rollout(5), states, paused=False, now=NOW, gate=b).admit == ["n1"]


def test_min_ready_seconds_of_the_pool_keeps_a_node_disrupted():
    one, _ = staged("one")
    ready = {"one": {"revision": one.revision, "since": "2026-01-01T11:59:30Z"}}
    n = node(
        "n0",
        spec={"configsetRevisions": {"one": one.revision}, "configsetReadySince": ready},
        entries=[{"name": "one", "generation": 1, "revision": one.revision}],
    )
    assert Budget.of([pool("default")], [n], [one], NOW)[1] == {}
    slow = pool("default", minReadySeconds=60)
    assert Budget.of([slow], [n], [one], NOW)[1] == {"n0": "ConfigSet one (minReadySeconds)"}


def test_not_ready_nodes_take_slots_and_pools_are_independent():
    nodes = [node("a", ready="Unknown"), node("b"), node("c", {"pool": "db"})]
    b, why = Budget.of([pool("default"), pool("db")], nodes, [], NOW)
    assert why == {"a": "not ready"}
    assert not b.take("b")  # default's one slot is a's
    assert b.take("c") and not b.take("b")
    assert b.take("a")  # a change on a disrupted node costs nothing


def test_grants_go_through_the_budget_and_stale_ones_are_revoked():
    nodes = [
        node("a", request="r-a"),
        node("b", request="r-b"),
        node("c", spec={"disruptionGranted": "old"}),
    ]
    b, _ = Budget.of([pool("default")], nodes, [], NOW)
    assert grants(b, nodes) == ([("a", "r-a")], ["c"])
    # a holds its grant: it is disrupted, b waits.
    nodes[0] = node("a", request="r-a", spec={"disruptionGranted": "r-a"})
    b, why = Budget.of([pool("default")], nodes, [], NOW)
    assert why["a"] == "os upgrade" and grants(b, nodes) == ([], ["c"])


def test_a_paused_pool_grants_nothing_and_admits_only_new_nodes():
    nodes = [node("a", request="r-a"), node("b")]
    b, _ = Budget.of([pool("default", paused=True)], nodes, [], NOW)
    assert grants(b, nodes) == ([], [])
    fresh = [
        NodeState("b", None, None, "", None, fresh=True),
        NodeState("a", "r1", "r1", "", STAMP),
    ]
    p = plan("r2", Rollout(1), fresh, paused=False, now=NOW, gate=b)
    assert p.admit == ["b"] and p.waiting == ["a"]


def test_a_rollout_whose_nodes_are_all_in_paused_pools_says_so_and_status_exits_paused():
    from nodemanager.controller.rollout import progress
    from nodemanager.controller.staging import _held_by_pool
    from nodemanager.controller.summary import configset_status

    nodes = [node("a", {"role": "web", "pool": "web"}), node("b")]
    pools = [pool("web", paused=True), pool("default")]
    states = [NodeState("a", "r1", "r1", "", STAMP), NodeState("b", "r1", "r1", "", STAMP)]
    b, _ = Budget.of(pools, nodes, [], NOW)
    p = plan("r2", Rollout(2), states, paused=False, now=NOW, gate=b)
    assert p.admit == ["b"] and _held_by_pool(p, b, p.admit) == ""  # default still moves
    b, _ = Budget.of([pool("web", paused=True), pool("default", paused=True)], nodes, [], NOW)
    p = plan("r2", Rollout(2), states, paused=False, now=NOW, gate=b)
    why = _held_by_pool(p, b, [])
    assert p.admit == [] and why.startswith("pools default, web are paused"), why
    raw = {"metadata": {"name": "cs", "generation": 3}, "spec": {"rollout": {}}}
    status = configset_status(raw, [], now=STAMP, held_by_pool=why)
    raw["status"] = status
    paused = next(c for c in status["conditions"] if c["type"] == "Paused")
    assert (paused["status"], paused["reason"], paused["message"]) == ("True", "PoolPaused", why)
    state, message = progress(raw)
    assert state == "paused" and "pools default, web are paused" in message, message


def test_held_node_is_never_admitted():
    nodes = [node("c", {"pool": "db", "zone": "e"})]
    pools = [pool("db"), pool("edge", nodeSelector={"matchLabels": {"zone": "e"}})]
    b, _ = Budget.of(pools, nodes, [], NOW)
    fresh = [NodeState("c", None, None, "", None, fresh=True)]
    assert plan("r1", Rollout(1), fresh, paused=False, now=NOW, gate=b).admit == []
    assert grants(b, [node("c", {"pool": "db", "zone": "e"}, request="x")]) == ([], [])


def test_joining_a_halted_rollout_gets_the_last_good_revision_through_the_budget():
    states = [
        NodeState("a", "bad", "bad", "boom", STAMP),
        NodeState("b", "good", "good", "", STAMP),
        NodeState("c", None, "good", "", None),  # an existing node that starts matching
        NodeState("d", None, None, "", None, fresh=True),  # new to the fleet
    ]
    p = plan("bad", Rollout(1), states, paused=False, now=NOW, last_good="good")
    assert p.halted_by_failure and p.admit == []
    assert p.admit_last_good == ["d"]  # at once (new); c waits: a and d hold the slot
    p = plan("bad", Rollout(3), states, paused=False, now=NOW, last_good="good")
    assert p.admit_last_good == ["d", "c"]


def test_pool_status_counts_and_conditions():
    one, _ = staged("one")
    good = {"name": "one", "generation": 1, "revision": one.revision}
    nodes = [
        node("a", spec={"configsetRevisions": {"one": one.revision}}, entries=[good]),
        node("b", spec={"configsetRevisions": {"one": one.revision}}, entries=[]),
        node("c", ready="Unknown", degraded=True),
    ]
    default = pool("default")
    b, why = Budget.of([default], nodes, [one], NOW)
    c = counts(default, nodes, b, why, [one])
    assert (c.updated, c.updating, c.unavailable, c.degraded) == (["a"], ["b"], ["b", "c"], ["c"])
    s = pool_status({}, default, c, b.limit("default"), STAMP)
    assert (s["nodes"], s["ready"], s["updated"], s["unavailable"]) == (3, 2, 1, 2)
    conds = {x["type"]: x for x in s["conditions"]}
    assert conds["Updated"]["status"] == "False" and conds["Updating"]["status"] == "True"
    assert conds["Degraded"]["status"] == "True" and "c" in conds["Degraded"]["message"]
    done = [node("a", spec={"configsetRevisions": {"one": one.revision}}, entries=[good])]
    b, why = Budget.of([default], done, [one], NOW)
    s = pool_status({}, default, counts(default, done, b, why, [one]), 1, STAMP)
    assert {x["type"]: x["status"] for x in s["conditions"]} == {
        "Updated": "True",
        "Updating": "False",
        "Degraded": "False",
    }
    assert revision_name("one", staged("one")[1]) == one.revision


def test_reconcile_creates_the_default_pool_places_nodes_grants_and_writes_status():
    from nodemanager.controller.poolsync import PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    raws = [
        {"metadata": {"name": "a", "labels": {}, "resourceVersion": "1"}, "spec": {}},
        {
            "metadata": {"name": "b", "labels": {}, "resourceVersion": "2"},
            "spec": {"pool": "default"},
            "status": {"disruption": {"id": "r1", "reason": "OS upgrade"}},
        },
    ]
    views = [NodeView.from_dict(r) for r in raws]
    memory = PoolMemory()
    _, work = reconcile([], [], raws, views, memory, namespace="ns", now=STAMP, mono=0.0)
    calls = [(key, [(e.method, e.args) for e in o.effects]) for key, _, o in work]
    assert calls[0][0] == "NodePool/default" and calls[0][1][0][0] == "create_pool"
    assert ("pool/a", [("patch_node_spec", ("a", {"pool": "default"}))]) in calls
    assert ("grant/b", [("patch_node_spec", ("b", {"disruptionGranted": "r1"}))]) in calls
    pool = {"metadata": {"name": "default", "resourceVersion": "9"}, "spec": {"maxUnavailable": 1}}
    _, work = reconcile([pool], [], raws, views, memory, namespace="ns", now=STAMP, mono=0.0)
    (status,) = [o for key, _, o in work if key == "NodePool/default"]
    written = status.effects[0].args[1]
    assert written["nodes"] == 2 and written["maxUnavailable"] == 1
    memory.applied("default", status.effects, 0.0, "9")
    # Written and not yet in the cache: not written again.
    _, work = reconcile([pool], [], raws, views, memory, namespace="ns", now=STAMP, mono=1.0)
    assert not [k for k, _, _ in work if k == "NodePool/default"]
    # Only a count moved (a node turned Ready): written at most every progress_period.
    raws[0]["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    views = [NodeView.from_dict(r) for r in raws]
    kw = {"namespace": "ns", "now": STAMP, "progress_period": 5.0}
    _, work = reconcile([pool], [], raws, views, memory, mono=1.0, **kw)
    (waits,) = [o for key, _, o in work if key == "NodePool/default"]
    assert waits.effects == () and waits.requeue_after == 4.0
    _, work = reconcile([pool], [], raws, views, memory, mono=6.0, **kw)
    (now,) = [o for key, _, o in work if key == "NodePool/default"]
    assert now.effects[0].args[1]["ready"] == 1


def test_placements_are_spaced_over_syncs():
    from nodemanager.controller.poolsync import PLACEMENTS_PER_SYNC, PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    raws = [{"metadata": {"name": f"n{i}", "labels": {}}, "spec": {}} for i in range(250)]
    views = [NodeView.from_dict(r) for r in raws]
    pool = {"metadata": {"name": "default"}, "spec": {"maxUnavailable": 1}}
    _, work = reconcile([pool], [], raws, views, PoolMemory(), namespace="ns", now=STAMP, mono=0)
    assert len([k for k, _, _ in work if k.startswith("pool/")]) == PLACEMENTS_PER_SYNC


def test_pool_conflict_condition_is_written_naming_both_pools_and_removed_after():
    from nodemanager.controller.poolsync import conflict_conditions

    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    wanted = conflict_conditions(node, ["db", "edge"], STAMP)
    assert wanted is not None
    conflict = {c["type"]: c for c in wanted}["PoolConflict"]
    assert conflict["status"] == "True" and "db and edge" in conflict["message"]
    assert conflict_conditions({"status": {"conditions": wanted}}, ["db", "edge"], STAMP) is None
    assert conflict_conditions({"status": {"conditions": wanted}}, None, STAMP) == [
        {"type": "Ready", "status": "True"}
    ]
    assert conflict_conditions(node, None, STAMP) is None


def _pool_sync(pool_raw, memory, mono, *, dead="c"):
    """One pools reconcile of three nodes (``dead`` not Ready) and a ConfigSet none has yet:
    the default pool's status outcome (None: nothing to do)."""
    from nodemanager.controller.poolsync import reconcile
    from nodemanager.controller.summary import NodeView

    raws = [
        {
            "metadata": {"name": n, "labels": {"role": "web"}, "resourceVersion": "1"},
            "spec": {"pool": "default"},
            "status": {
                "conditions": [{"type": "Ready", "status": "Unknown" if n == dead else "True"}]
            },
        }
        for n in ("a", "b", "c")
    ]
    _, spec = staged("one")
    cs = {"metadata": {"name": "one", "generation": 1}, "spec": spec}
    views = [NodeView.from_dict(r) for r in raws]
    kw = {"namespace": "ns", "now": STAMP, "progress_period": 5.0}
    _, work = reconcile([pool_raw], [cs], raws, views, memory, mono=mono, **kw)
    return next((o for key, _, o in work if key == "NodePool/default"), None)


def _written(pool_raw, outcome, memory, mono, *, cache=True):
    """``outcome``'s status write done; the cache shows it (a new resourceVersion) if ``cache``."""
    memory.applied("default", outcome.effects, mono, pool_raw["metadata"]["resourceVersion"])
    if cache:
        pool_raw["status"] = outcome.effects[0].args[1]
        pool_raw["metadata"]["resourceVersion"] += "0"
    return outcome.effects[0].args[1]


def _default(generation=3, **spec):
    meta = {"name": "default", "resourceVersion": "9", "generation": generation}
    return {"metadata": meta, "spec": {"maxUnavailable": 1, **spec}}


def test_a_pool_spec_edit_and_its_deadline_reach_status_whatever_was_written_before():
    from nodemanager.controller.poolsync import PoolMemory

    memory, raw = PoolMemory(), _default()
    first = _written(raw, _pool_sync(raw, memory, 0.0), memory, 0.0)
    assert first["observedGeneration"] == 3 and first["maxUnavailable"] == 1
    # The spec edited (a new generation) within progress_period of the last write.
    raw["metadata"].update(generation=4, resourceVersion="11")
    raw["spec"] = {"maxUnavailable": 2, "progressDeadlineSeconds": 5}
    edit = _written(raw, _pool_sync(raw, memory, 1.0), memory, 1.0)
    assert edit["observedGeneration"] == 4 and edit["maxUnavailable"] == 2
    # Nothing changes on any node: the reconcile still asks to look again at the deadline,
    # and then Updating names the node waited for.
    waits = _pool_sync(raw, memory, 2.0)
    assert waits.effects == () and waits.requeue_after is not None and waits.requeue_after <= 5
    late = _written(raw, _pool_sync(raw, memory, 7.0), memory, 7.0)
    updating = {c["type"]: c for c in late["conditions"]}["Updating"]
    assert updating["reason"] == "ProgressDeadlineExceeded" and "c" in updating["message"]
    assert _pool_sync(raw, memory, 8.0) is None  # written and seen: nothing more


def test_a_pool_status_the_cache_moved_past_or_a_skipped_write_is_written_again():
    from nodemanager.controller.poolsync import PoolMemory

    memory, raw = PoolMemory(), _default()
    outcome = _pool_sync(raw, memory, 0.0)
    wanted = _written(raw, outcome, memory, 0.0, cache=False)
    quiet = _pool_sync(raw, memory, 10.0)  # written, the cache not there yet
    assert quiet is None or not quiet.effects
    # The cache shows a newer version whose status is not ours (a relist after our write was
    # lost in a timeout, another writer): the server holds that, so ours is written again.
    raw["metadata"]["resourceVersion"] = "12"
    raw["status"] = {**wanted, "updated": 3, "conditions": []}
    again = _pool_sync(raw, memory, 20.0)
    assert again is not None and again.effects[0].args[1]["updated"] == wanted["updated"]
    # A write the server skipped (404) is not remembered as written.
    memory.applied("default", (), 30.0, "12")
    assert _pool_sync(raw, memory, 30.0).effects


@pytest.mark.parametrize("bad", [0, "0%", "150%", "²"])
def test_an_invalid_pool_says_which_field_in_its_status_and_selects_nothing(bad):
    from nodemanager.controller.poolsync import PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    raws = [
        {"metadata": {"name": n, "labels": {"role": "db"}}, "spec": {"pool": "db"}}
        for n in ("a", "b")
    ]
    views = [NodeView.from_dict(r) for r in raws]
    db = {
        "metadata": {"name": "db", "generation": 2},
        "spec": {"nodeSelector": {"matchLabels": {"role": "db"}}, "maxUnavailable": bad},
    }
    default = {"metadata": {"name": "default"}, "spec": {"maxUnavailable": bad}}
    budget, work = reconcile(
        [db, default], [], raws, views, PoolMemory(), namespace="ns", now=STAMP, mono=0.0
    )
    assert budget.member == {"a": "default", "b": "default"}  # the fleet goes on
    writes = {k: o.effects[0].args for k, _, o in work if k.startswith("NodePool/")}
    for name, held in (("db", "it selects no node"), ("default", "its defaults hold")):
        status = writes[f"NodePool/{name}"][1]
        degraded = {c["type"]: c for c in status["conditions"]}["Degraded"]
        assert degraded["status"] == "True" and degraded["reason"] == "InvalidSpec"
        assert "spec.maxUnavailable: must" in degraded["message"] and held in degraded["message"]
    assert writes["NodePool/db"][1]["observedGeneration"] == 2
    assert writes["NodePool/default"][1]["nodes"] == 2


def test_a_pool_with_a_bad_selector_says_so_and_selects_nothing():
    from nodemanager.controller.poolsync import PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    raws = [{"metadata": {"name": "a", "labels": {"role": "db"}}, "spec": {"pool": "db"}}]
    views = [NodeView.from_dict(r) for r in raws]
    # NotIn with a value no label can have would match every node: refused, not guessed at.
    selector = {"matchExpressions": [{"key": "role", "operator": "NotIn", "values": ["d b"]}]}
    db = {"metadata": {"name": "db"}, "spec": {"nodeSelector": selector}}
    default = {"metadata": {"name": "default"}, "spec": {"maxUnavailable": 1}}
    budget, work = reconcile(
        [db, default], [], raws, views, PoolMemory(), namespace="ns", now=STAMP, mono=0.0
    )
    assert budget.member == {"a": "default"}
    (status,) = [o.effects[0].args[1] for k, _, o in work if k == "NodePool/db"]
    degraded = {c["type"]: c for c in status["conditions"]}["Degraded"]
    assert degraded["reason"] == "InvalidSpec"
    assert "spec.nodeSelector.matchExpressions[0].values: label value 'd b'" in degraded["message"]


def _placing(raws, memory, mono):
    """One pools reconcile over ``raws`` (the cache): the spec.pool writes it asks for."""
    from nodemanager.controller.poolsync import reconcile
    from nodemanager.controller.summary import NodeView

    pool = {"metadata": {"name": "default", "resourceVersion": "1"}, "spec": {"maxUnavailable": 1}}
    views = [NodeView.from_dict(r) for r in raws]
    _, work = reconcile([pool], [], raws, views, memory, namespace="ns", now=STAMP, mono=mono)
    return [o for key, _, o in work if key.startswith("pool/")]


def test_a_placement_written_and_not_yet_in_the_cache_is_not_written_again():
    from nodemanager.controller.poolsync import PLACEMENTS_PER_SYNC, PoolMemory

    raws = [{"metadata": {"name": f"n{i:03d}", "labels": {}}, "spec": {}} for i in range(300)]
    memory = PoolMemory()
    first = _placing(raws, memory, 0.0)
    assert len(first) == PLACEMENTS_PER_SYNC
    for outcome in first:  # the server took them; the watch has not shown one yet
        memory.applied("pool", outcome.effects, 0.0, "1")
    second = _placing(raws, memory, 1.0)
    names = [o.effects[0].args[0] for o in second]
    assert names == [f"n{i:03d}" for i in range(PLACEMENTS_PER_SYNC, 300)]
    for outcome in second:
        memory.applied("pool", outcome.effects, 1.0, "1")
    assert _placing(raws, memory, 2.0) == []  # at rest while the cache catches up
    # The cache shows every write: nothing to write, nothing left remembered.
    for raw in raws:
        raw["spec"] = {"pool": "default"}
    assert _placing(raws, memory, 3.0) == [] and memory.spec_written == {}
    # A node whose pool is taken back (an edit, the node created again) is placed again.
    raws[0]["spec"] = {}
    assert [o.effects[0].args[0] for o in _placing(raws, memory, 4.0)] == ["n000"]


def test_a_placement_never_shown_by_the_cache_is_written_again_after_a_while():
    from nodemanager.controller.poolsync import SEEN_WITHIN, PoolMemory

    raws = [{"metadata": {"name": "a", "labels": {}}, "spec": {}}]
    memory = PoolMemory()
    (first,) = _placing(raws, memory, 0.0)
    memory.applied("pool/a", first.effects, 0.0, "1")
    assert _placing(raws, memory, SEEN_WITHIN - 1) == []
    (again,) = _placing(raws, memory, SEEN_WITHIN)  # lost (a relist past it, an edit since)
    assert again.effects == first.effects


def test_a_grant_written_and_not_yet_in_the_cache_is_not_written_again():
    from nodemanager.controller.poolsync import PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    raws = [
        {
            "metadata": {"name": "a", "labels": {}, "resourceVersion": "1"},
            "spec": {"pool": "default"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "disruption": {"id": "r1", "reason": "OS upgrade"},
            },
        }
    ]
    pool = {"metadata": {"name": "default", "resourceVersion": "1"}, "spec": {"maxUnavailable": 1}}
    memory = PoolMemory()

    def grants(mono):
        views = [NodeView.from_dict(r) for r in raws]
        kw = {"namespace": "ns", "now": STAMP, "mono": mono}
        budget, work = reconcile([pool], [], raws, views, memory, **kw)
        assert budget.busy.get("default") == {"a"}  # counted whether written now or before
        return [o for key, _, o in work if key.startswith("grant/")]

    (first,) = grants(0.0)
    memory.applied("grant/a", first.effects, 0.0, "1")
    assert grants(1.0) == []
    raws[0]["spec"]["disruptionGranted"] = "r1"
    assert grants(2.0) == [] and memory.spec_written == {}


def _merge(target, patch):
    """A JSON merge patch (RFC 7386) as the API server applies it: null deletes."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = _merge(out.get(key) if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"pool": "db"},
        {"pool": "default", "poolFencing": {"enabled": True, "timeoutSeconds": 90}},
        {"pool": "", "poolFencing": {"enabled": True, "timeoutSeconds": 60}},
        {"pool": "db", "poolFencing": {"enabled": True}},  # stored by an older controller
        {"pool": "staged", "poolStageAll": True},
        {"pool": "default", "poolStageAll": True},
    ],
)
def test_a_placement_as_the_server_stores_it_asks_for_nothing_more(spec):
    fenced = pool("fenced", fencing={"enabled": True})  # timeoutSeconds defaulted: 60
    staged = pool("staged", stageAll=True)
    pools = {"default": pool("default"), "db": pool("db"), "fenced": fenced, "staged": staged}
    for name, member, conflicts in [
        ("a", {"a": "db"}, {}),
        ("a", {"a": "fenced"}, {}),
        ("a", {"a": "staged"}, {}),
        ("a", {"a": "default"}, {}),
        ("a", {}, {"a": ["db", "fenced"]}),
    ]:
        raw = {"metadata": {"name": name, "labels": {}}, "spec": spec}
        (written,) = placements([Member.of(raw)], member, conflicts, pools) or [(name, {})]
        stored = {**raw, "spec": _merge(spec, written[1])}
        assert placements([Member.of(stored)], member, conflicts, pools) == []


def test_pool_membership_ignores_labels_a_node_sets_on_itself_unless_trusted():
    """web-1 labelled itself kubernetes.io/arch=arm64 and took the arm pool's only slot
    (issue 37): membership now goes by the labels Secret grants trust."""
    arm = pool("arm", nodeSelector={"matchLabels": {"kubernetes.io/arch": "arm64"}})
    agent = pool("mine", nodeSelector={"matchLabels": {"agent.nodemanager.io/x": "y"}})
    admin = pool("db")
    nodes = [
        node("web-1", {"kubernetes.io/arch": "arm64", "agent.nodemanager.io/x": "y"}),
        node("db-1", {"pool": "db", "kubernetes.io/arch": "arm64"}),
        node("web-2", {"kubernetes.io/hostname": "web-2"}),
    ]
    member, conflicts = assign([pool("default"), arm, agent, admin], nodes)
    assert member == {"web-1": "default", "db-1": "db", "web-2": "default"} and not conflicts
    member, conflicts = assign([pool("default"), arm, admin], nodes, trust_node_labels=True)
    assert member["web-1"] == "arm" and conflicts == {"db-1": ["arm", "db"]}


def test_a_grant_held_past_the_deadline_is_taken_back_and_that_request_not_granted_again():
    from nodemanager.controller.poolsync import PoolMemory

    memory = PoolMemory()
    holder = node("a", request="r-a", spec={"disruptionGranted": "r-a"})
    waiting = node("b", request="r-b")
    nodes = [holder, waiting]
    assert memory.expire(nodes, 0.0, 60.0) == {}
    b, _ = Budget.of([pool("default")], nodes, [], NOW)
    assert grants(b, nodes, memory.expire(nodes, 59.0, 60.0)) == ([], [])  # b waits
    expired = memory.expire(nodes, 61.0, 60.0)
    assert expired == {"a": "r-a"}
    assert grants(b, nodes, expired) == ([], ["a"])  # taken back; b next sync
    gone = [node("a", request="r-a"), waiting]  # the grant is gone, the request stays
    b, _ = Budget.of([pool("default")], gone, [], NOW)
    assert grants(b, gone, memory.expire(gone, 62.0, 60.0)) == ([("b", "r-b")], [])
    again = [node("a", request="r-a2"), node("b", request="r-b", spec={"disruptionGranted": "r-b"})]
    assert memory.expire(again, 63.0, 60.0) == {}  # a new request is a new grant to wait for
    assert memory.expire(nodes, 1000.0, 0.0) == {}  # 0: no deadline


def test_a_pool_selecting_on_a_self_reported_label_gets_one_warning_event():
    from nodemanager.controller.poolsync import PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    raw_pool = {
        "metadata": {"name": "arm", "resourceVersion": "5", "uid": "u"},
        "spec": {
            "maxUnavailable": 1,
            "nodeSelector": {"matchLabels": {"kubernetes.io/arch": "arm64"}},
        },
    }
    raws = [
        {
            "metadata": {
                "name": "w",
                "labels": {"kubernetes.io/arch": "arm64"},
                "resourceVersion": "1",
            },
            "spec": {"pool": "default"},
        }
    ]
    views = [NodeView.from_dict(r) for r in raws]
    memory = PoolMemory()
    kw = {"namespace": "ns", "now": STAMP, "mono": 0.0}
    budget_, work = reconcile([raw_pool], [], raws, views, memory, **kw)
    notes = [n for key, _, o in work if key == "NodePool-warning/arm" for n in o.notes]
    assert len(notes) == 1 and notes[0].warning and "kubernetes.io/arch" in notes[0].message
    assert budget_.member["w"] == "default"
    _, work = reconcile([raw_pool], [], raws, views, memory, **kw)
    assert not [k for k, _, _ in work if k == "NodePool-warning/arm"]  # once per version
    budget_, work = reconcile(
        [raw_pool], [], raws, views, PoolMemory(), trust_node_labels=True, **kw
    )
    assert budget_.member["w"] == "arm"
    assert not [k for k, _, _ in work if k == "NodePool-warning/arm"]


def test_a_node_churning_request_ids_is_granted_with_a_growing_wait():
    """100 new status.disruption ids in 38 s cost 37 grant writes (issue 37)."""
    from nodemanager.controller.poolsync import PoolMemory, reconcile
    from nodemanager.controller.summary import NodeView

    memory = PoolMemory()
    pool_raw = {
        "metadata": {"name": "default", "resourceVersion": "1"},
        "spec": {"maxUnavailable": 1},
    }
    writes, t = 0, 0.0
    while t < 38.0:
        raws = [
            {
                "metadata": {"name": "w", "labels": {}, "resourceVersion": str(int(t * 10))},
                "spec": {"pool": "default"},
                "status": {"disruption": {"id": f"r{t:.1f}", "reason": "OS upgrade"}},
            }
        ]
        views = [NodeView.from_dict(r) for r in raws]
        _, work = reconcile([pool_raw], [], raws, views, memory, namespace="ns", now=STAMP, mono=t)
        writes += sum(1 for key, _, o in work if key == "grant/w" and o.effects)
        t += 0.38
    assert 4 <= writes <= 8, writes  # 1, 2, 4, 8, 16 s apart: not 37
    assert memory.grant_wait("w", t + 61) == 0.0  # a node that asks now and then never waits
