"""NodePool spec.stageAll: ConfigSets without spec.rollout staged on the pool's nodes only.

The rule (api/revisions.py ``staged``), the switch-over (pools.py ``placements``: flag and
adoptions in one write), disruption and admission through the pool's budget (pools.py,
staging.py) and pruning once the pool stops staging, all on plain data.
"""

from __future__ import annotations

import datetime as dt

from nodemanager.api.pool import NodePool
from nodemanager.api.revisions import admitted, staged
from nodemanager.controller.effects import Deferred
from nodemanager.controller.pools import ADOPTED_SINCE, Budget, Member, Target, placements, updated
from nodemanager.controller.rollout import revision_name
from nodemanager.controller.staging import POOL_STAGED, prune, settings, sync

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
FLAG = {"poolStageAll": True}


def configset(content="v1", generation=1, rollout=None):
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "files": [{"path": "/etc/plain", "content": content}],
        **({"rollout": rollout} if rollout is not None else {}),
    }
    meta = {"name": "plain", "generation": generation, "resourceVersion": str(generation)}
    return {"metadata": meta, "spec": spec}


def raw_node(name, pool="web", *, spec=None, entry=None):
    status = {"conditions": [{"type": "Ready", "status": "True"}], "configsets": []}
    if entry is not None:
        status["configsets"].append({"name": "plain", **entry})
    return {
        "metadata": {"name": name, "labels": {"role": "web", "pool": pool}},
        "spec": {"pool": pool, **(spec or {})},
        "status": status,
    }


def pools(stage_all=True, max_unavailable=2):
    web = {
        "nodeSelector": {"matchLabels": {"pool": "web"}},
        "maxUnavailable": max_unavailable,
        "stageAll": stage_all,
    }
    return [
        NodePool.from_dict({"metadata": {"name": "default"}, "spec": {"maxUnavailable": 1}}),
        NodePool.from_dict({"metadata": {"name": "web"}, "spec": web}),
    ]


def revision_object(cs, number=1):
    return {
        "metadata": {"name": revision_name("plain", cs["spec"]), "labels": {}},
        "revision": number,
        "data": {"spec": {k: v for k, v in cs["spec"].items() if k != "rollout"}},
    }


def test_stage_all_is_a_pool_field_off_by_default():
    assert not NodePool.from_dict({"metadata": {"name": "p"}, "spec": {}}).stage_all
    assert pools()[1].stage_all


def test_the_one_rule_the_agent_applies_an_unstaged_configset_at_its_admission_only_when_flagged():
    v1, v2 = configset("v1"), configset("v2", generation=2)
    rev = revision_object(v1)
    name = rev["metadata"]["name"]
    flagged = raw_node("a", spec={**FLAG, "configsetRevisions": {"plain": name}})
    plain = raw_node("b", spec={"configsetRevisions": {"plain": name}})  # the flag gone
    assert staged(v2, flagged) and not staged(v2, plain)
    assert staged(configset(rollout={}), plain)  # spec.rollout stages it everywhere
    # Flagged: the admitted content, not the live spec, and no rollout added to it.
    (out,), running = admitted([v2], flagged, {name: rev})
    assert out["spec"] == rev["data"]["spec"] and "rollout" not in out["spec"]
    assert running == {"plain": name} and out["metadata"]["resourceVersion"] == f"2:{name}"
    # Flagged and not admitted: not applied (the budget admits it); unflagged: live, at once.
    assert admitted([v2], raw_node("c", spec=FLAG), {name: rev}) == ([], {})
    assert admitted([v2], plain, {name: rev}) == ([v2], {})


def test_switching_over_flags_and_adopts_in_one_write_and_never_before_the_revision_exists():
    cs = configset()
    target = Target.of(cs)
    nodes = [
        Member.of(raw_node("clean", entry={"generation": 1})),
        Member.of(raw_node("failed", entry={"generation": 1, "error": "boom"})),
        Member.of(raw_node("behind", entry={"generation": 0})),
        Member.of(raw_node("other", "default", entry={"generation": 1})),
    ]
    member = {"clean": "web", "failed": "web", "behind": "web", "other": "default"}
    by_name = {p.name: p for p in pools()}
    # The revision is not made yet: nobody is switched (the agents would drop the ConfigSet).
    assert placements(nodes, member, {}, by_name, [target], set()) == []
    out = dict(placements(nodes, member, {}, by_name, [target], {target.revision}))
    assert out == {
        "clean": {
            "poolStageAll": True,
            "configsetRevisions": {"plain": target.revision},
            "configsetReadySince": {"plain": {"revision": target.revision, "since": ADOPTED_SINCE}},
        },
        # Not running the current content cleanly: staged, waits for the budget.
        "failed": {"poolStageAll": True},
        "behind": {"poolStageAll": True},
    }
    # Adopted and flagged, before its agent reports the revision: at the target, not disrupted.
    adopted = Member.of(raw_node("clean", spec=out["clean"], entry={"generation": 1}))
    budget, why = Budget.of(pools(), [adopted], [target], NOW)
    assert why == {} and updated(adopted, [target])
    assert budget.stages_all("clean") and not budget.stages_all("other")
    # The pool stops staging: the flag goes (back to applying at once). A node two pools
    # select keeps what it has: staged, it stays held; never staged, it was never held.
    off = {p.name: p for p in pools(stage_all=False)}
    assert placements([adopted], member, {}, off, [target], {target.revision}) == [
        ("clean", {"poolStageAll": None})
    ]
    held = [Member.of(raw_node("held", "", spec=FLAG)), Member.of(raw_node("free", ""))]
    two = {"held": ["web", "x"], "free": ["web", "x"]}
    assert placements(held, {}, two, by_name, [target], {target.revision}) == []


def test_a_change_is_admitted_through_the_pool_budget_and_other_pools_apply_it_at_once():
    v1, v2 = configset("v1"), configset("v2", generation=2)
    r1, r2 = revision_name("plain", v1["spec"]), revision_name("plain", v2["spec"])
    at_v1 = {"generation": 1, "revision": r1}
    spec = {**FLAG, "configsetRevisions": {"plain": r1}}
    raws = [raw_node(f"w{i}", spec=spec, entry=at_v1) for i in range(5)]
    raws.append(raw_node("o0", "default", entry={"generation": 1}))
    members = [Member.of(r) for r in raws]
    budget, why = Budget.of(pools(), members, [Target.of(v2)], NOW)
    assert why == {}
    assert settings(v2, raws, budget) == POOL_STAGED
    fleet = Deferred()
    step = sync(fleet, "ns", v2, POOL_STAGED, raws, [revision_object(v1)], r1, gate=budget)
    admits = [e.args for e in fleet.effects if e.method == "admit"]
    # Two of web's five (its maxUnavailable), none of the other pool's: it applies v2 at once.
    assert admits == [(f"w{i}", "configsetRevisions", "plain", r2) for i in (0, 1)]
    assert [e.method for e in fleet.effects][0] == "create_revision"
    assert step.counts.matched == ["o0", "w0", "w1", "w2", "w3", "w4"]
    assert step.counts.pending == ["o0", "w0", "w1", "w2", "w3", "w4"]
    # The admitted nodes now count against web's budget; nothing else is admitted there.
    for r in raws[:2]:
        r["spec"]["configsetRevisions"] = {"plain": r2}
    raws[-1]["status"]["configsets"] = [{"name": "plain", "generation": 2}]
    budget, why = Budget.of(pools(), [Member.of(r) for r in raws], [Target.of(v2)], NOW)
    assert why == {"w0": "ConfigSet plain", "w1": "ConfigSet plain"}
    fleet = Deferred()
    step = sync(fleet, "ns", v2, POOL_STAGED, raws, [revision_object(v2, 2)], r2, gate=budget)
    assert not [e for e in fleet.effects if e.method == "admit"]
    assert step.counts.updated == ["o0"]


def test_without_a_stage_all_pool_an_unstaged_configset_is_not_staged_and_admissions_go():
    cs = configset()
    raws = [raw_node("a", entry={"generation": 1})]
    budget, _ = Budget.of(pools(stage_all=False), [Member.of(r) for r in raws], [], NOW)
    assert settings(cs, raws, budget) is None
    assert settings(configset(rollout={"maxUnavailable": 3}), raws, budget).max_unavailable == 3

    class Fleet:
        removed: list[tuple[str, str]] = []

        def unadmit(self, node, fields, configset):
            self.removed.append((node, configset))

    kept = raw_node("kept", spec={**FLAG, "configsetRevisions": {"plain": "r1"}})
    gone = raw_node("gone", spec={"configsetRevisions": {"plain": "r1"}})
    assert prune(Fleet(), [cs], [kept, gone]) == [("gone", "plain")]
