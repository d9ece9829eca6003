"""Each kind of write a ConfigSet's reconcile makes, failed once: the controller's memory does
not take it as done, the object backs off, and the same write is made again once the backoff
ends, from the same cache (a failed write changes nothing the cache could show). The real
handler (handler.py), reconcile and memory; only the API server is an in-memory fake."""

from __future__ import annotations

from typing import Any

import pytest

from nodemanager.controller import rollout, staging
from nodemanager.controller.configsets import Memory, reconcile
from nodemanager.controller.effects import Deferred, Outcome
from nodemanager.controller.handler import Handled, handle
from nodemanager.controller.retry import Gate
from nodemanager.controller.summary import NodeView
from nodemanager.kube.errors import Temporary
from tests.unit.controller.test_reconcile import NOW, SETTINGS, Fleet, configset, node


def revision(cs: dict[str, Any], number: int) -> dict[str, Any]:
    return rollout.revision_object(cs, "ns", number)


def entry(revision_name: str) -> dict[str, Any]:
    return {"name": "web", "generation": 1, "revision": revision_name, "error": ""}


def new_configset():
    """A staged ConfigSet over a host new to the fleet: revision, mark, admission, status."""
    return configset("web", staged=True), [node("a")], []


def applied_not_marked():
    """The host applied the target; its ready time is not recorded yet."""
    raw = configset("web", staged=True)
    target = rollout.revision_name("web", raw["spec"])
    return raw, [node("a", entry(target), admitted={"web": target})], [revision(raw, 1)]


def undone():
    """The content of revision 1 is back while revision 2 is current: renumbered."""
    raw = configset("web", staged=True)
    later = configset("web", generation=2, staged=True)
    current = rollout.revision_name("web", later["spec"])
    raw["status"] = {"updateRevision": current}
    nodes = [node("a", entry(current), admitted={"web": current})]
    return raw, nodes, [revision(raw, 1), revision(later, 2)]


def past_history_limit():
    """Three revisions and revisionHistoryLimit 1: the oldest unused one is deleted."""
    raw = configset("web", generation=3, staged=True)
    raw["spec"]["rollout"]["revisionHistoryLimit"] = 1
    target = rollout.revision_name("web", raw["spec"])
    old = [revision(configset("web", generation=g, staged=True), g) for g in (1, 2)]
    nodes = [node("a", entry(target), admitted={"web": target})]
    return raw, nodes, [*old, revision(raw, 3)]


KINDS = [
    ("create_revision", new_configset),
    ("patch_node_spec", new_configset),  # the host's first apply recorded (firstapplied.py)
    ("admit", new_configset),
    ("patch_configset_status", new_configset),
    ("mark_ready", applied_not_marked),
    ("renumber_revision", undone),
    ("delete_revision", past_history_limit),
]


def sync(raw, nodes, revisions, memory: Memory, fleet: Fleet, gate: Gate, now: float):
    """One try of the ConfigSet's key, as the controller's loop makes it."""
    name, version = raw["metadata"]["name"], raw["metadata"]["resourceVersion"]
    views = [NodeView.from_dict(n) for n in nodes]

    def one() -> Outcome:
        return reconcile(raw, views, nodes, revisions, memory, SETTINGS, now=NOW, mono=now)

    def done(_: Outcome, result: Any) -> None:
        memory.applied(name, result.done, now, version)

    return handle(f"ConfigSet/{name}", version, one, fleet, gate, now, done=done)


def fails_once_then_retried(method: str, attempt, fleet: Fleet) -> None:
    gate, memory = Gate(), Memory()
    fleet.fail[method] = Temporary("timed out")
    first = attempt(fleet, gate, memory, 100.0)
    assert isinstance(first, Handled) and isinstance(first.result.error, Temporary)
    assert fleet.calls.count(method) == 1, fleet.calls
    del fleet.fail[method]
    assert attempt(fleet, gate, memory, 100.1) is None  # backing off: not tried
    before = len(fleet.calls)
    again = attempt(fleet, gate, memory, 100.0 + gate.cap + 1)
    assert again is not None and again.result.error is None, again
    assert method in fleet.calls[before:], fleet.calls


@pytest.mark.parametrize(("method", "scenario"), KINDS, ids=[k for k, _ in KINDS])
def test_a_failed_write_is_not_remembered_and_is_retried_after_backoff(method, scenario):
    raw, nodes, revisions = scenario()
    assert method in _planned(raw, nodes, revisions)  # the scenario makes this write

    def attempt(fleet, gate, memory, now):
        return sync(raw, nodes, revisions, memory, fleet, gate, now)

    fleet = Fleet()
    fleet.revisions = {r["metadata"]["name"]: dict(r) for r in revisions}  # the server's
    fails_once_then_retried(method, attempt, fleet)


def test_a_failed_admission_removal_is_retried_after_backoff():
    nodes = [node("a", admitted={"gone": "gone-123"})]

    def attempt(fleet, gate, memory, now):
        deferred = Deferred()
        staging.prune(deferred, [], nodes)
        return handle("Admission/a/gone", "5", Outcome(tuple(deferred.effects)), fleet, gate, now)

    fails_once_then_retried("unadmit", attempt, Fleet())


def _planned(raw, nodes, revisions) -> list[str]:
    views = [NodeView.from_dict(n) for n in nodes]
    outcome = reconcile(raw, views, nodes, revisions, Memory(), SETTINGS, now=NOW, mono=0.0)
    return [getattr(e, "method", "") for e in outcome.effects]
