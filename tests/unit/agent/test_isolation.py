"""The agent's isolation guards as plain functions: peers, referenced names, labels, self-test."""

from __future__ import annotations

import base64

from nodemanager.agent.metrics import Metrics
from nodemanager.agent.ownlabels import drifted
from nodemanager.agent.peers import REASON, PeerFilter, clean_own
from nodemanager.agent.refs import referenced
from nodemanager.agent.selftest import CONDITION, EVENT_REASON, PolicySelfTest

KEY = base64.b64encode(bytes(32)).decode()


def peer(name: str, rv: str, key: str) -> dict:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "status": {"wireGuard": [{"name": "wg0", "publicKey": key}]},
    }


def test_invalid_peer_entries_are_dropped_and_reported_once_per_change():
    events = []
    peers = PeerFilter(lambda reason, message: events.append((reason, message)))
    evil = KEY + "\nAllowedIPs = 0.0.0.0/0"
    nodes = peers.clean([peer("a", "1", KEY), peer("b", "1", evil)])
    assert nodes[0]["status"]["wireGuard"] == [{"name": "wg0", "publicKey": KEY}]
    assert nodes[1]["status"]["wireGuard"] == []
    assert events == [
        (
            REASON,
            "ignored invalid status of ManagedNode b: status.wireGuard[0].publicKey: "
            "not a base64 32-byte key",
        )
    ]
    assert "AllowedIPs" not in events[0][1]  # the Event names the field, never the value
    peers.clean([peer("b", "1", evil)])
    peers.clean([peer("b", "2", evil)])  # same problem written again: no new Event
    assert len(events) == 1
    peers.clean([peer("b", "3", KEY)])
    peers.clean([peer("b", "4", evil)])  # fixed, then broken again: reported again
    assert len(events) == 2


def test_own_observed_status_loses_only_entries_the_schema_refuses():
    observed = {"interfaces": {"a-very-long-interface": {"ipv4": ["10.0.0.1"]}, "eth0": {}}}
    assert clean_own(observed) == {"interfaces": {"eth0": {"ipv4": [], "ipv6": []}}}


def cs(name: str, host: str, secrets: list[str], configmaps: list[str] = ()) -> dict:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"kubernetes.io/hostname": host}},
            "files": [
                {
                    "path": "/x",
                    "template": "t",
                    "secretRefs": [{"name": s} for s in secrets],
                    "configMapRefs": [{"name": c} for c in configmaps],
                }
            ],
        },
    }


def test_only_selected_configsets_references_are_wanted():
    configsets = [cs("mine", "a", ["db"], ["cm"]), cs("theirs", "b", ["other"]), {"bad": 1}]
    assert referenced(configsets, {"kubernetes.io/hostname": "a"}) == ({"db"}, {"cm"})
    assert referenced(configsets, {"kubernetes.io/hostname": "c"}) == (set(), set())


def test_managed_label_drift():
    managed = {"kubernetes.io/hostname": "a", "nodemanager.io/os": "arch"}
    node = {"metadata": {"labels": {"kubernetes.io/hostname": "b", "nodemanager.io/os": "arch"}}}
    assert drifted(node, managed) == {"kubernetes.io/hostname": "a"}
    assert drifted({"metadata": {"labels": dict(managed, role="x")}}, managed) == {}


def test_self_test_condition_event_and_metric():
    gone, also = ["nodemanager-node-restriction"], ["nodemanager-node-leases"]
    answers, events = [None, [], gone, gone, gone + also], []
    metrics = Metrics()
    registry = metrics.registry
    test = PolicySelfTest(
        lambda: answers.pop(0), lambda r, m: events.append(r), metrics.admission_policy_enforced
    )

    def gauge() -> float:
        return registry.get_sample_value("nodemanager_admission_policy_enforced")

    def cond(previous: dict, now: str) -> dict:
        status = test.with_condition({"conditions": [{"type": "Ready"}]}, previous, now)
        assert status["conditions"][0] == {"type": "Ready"}
        return status["conditions"][1]

    test.run()  # inconclusive
    assert gauge() == -1 and cond({}, "t0")["status"] == "Unknown"
    test.run()  # refused: enforced
    assert gauge() == 1 and events == []
    enforced = cond({}, "t1")
    assert enforced["type"] == CONDITION and enforced["status"] == "True"
    test.run()  # accepted: the policy is gone
    assert gauge() == 0 and events == [EVENT_REASON]
    missing = cond({"conditions": [enforced]}, "t2")
    assert missing["status"] == "False" and missing["lastTransitionTime"] == "t2"
    assert cond({"conditions": [missing]}, "t3")["lastTransitionTime"] == "t2"
    assert "nodemanager-node-restriction or its binding" in missing["message"]
    test.run()  # still accepted: one Event per change
    assert events == [EVENT_REASON]
    test.run()  # another one gone too: a change, named
    assert events == [EVENT_REASON, EVENT_REASON]
    assert "nodemanager-node-restriction, nodemanager-node-leases" in cond({}, "t4")["message"]
