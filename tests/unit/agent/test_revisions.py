"""Staged ConfigSets in the agent's snapshot: the admitted revision's content applies."""

from __future__ import annotations

from nodemanager.agent.revisions import admitted, report

LIVE = {
    "metadata": {"name": "web", "generation": 3},
    "spec": {"rollout": {"maxUnavailable": 1}, "files": [{"path": "/new"}]},
}
PLAIN = {"metadata": {"name": "plain"}, "spec": {"files": [{"path": "/p"}]}}
REVISION = {"metadata": {"name": "web-aaa"}, "data": {"spec": {"files": [{"path": "/old"}]}}}


def node(revisions):
    return {"metadata": {"name": "n"}, "spec": {"configsetRevisions": revisions}}


def test_admitted_revision_content_replaces_the_live_spec():
    out, running = admitted([LIVE, PLAIN], node({"web": "web-aaa"}), {"web-aaa": REVISION})
    assert out[0]["spec"]["files"] == [{"path": "/old"}]
    assert out[0]["metadata"]["resourceVersion"].endswith(":web-aaa")
    assert out[0]["spec"]["rollout"] == {"maxUnavailable": 1}
    assert out[1] == PLAIN  # without spec.rollout: the live object, as before
    assert running == {"web": "web-aaa"}


def test_not_admitted_means_not_applied():
    out, running = admitted([LIVE], node({}), {"web-aaa": REVISION})
    assert out == [] and running == {}
    out, _ = admitted([LIVE], node({"web": "web-gone"}), {})
    assert out == []


def test_status_entries_name_the_revision():
    status = {"configsets": [{"name": "web", "error": ""}, {"name": "plain", "error": ""}]}
    got = report(status, {"web": "web-aaa"})
    assert got["configsets"] == [
        {"name": "web", "error": "", "revision": "web-aaa"},
        {"name": "plain", "error": ""},
    ]
