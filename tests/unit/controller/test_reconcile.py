"""The reconcile functions against an in-memory fleet: each returns its writes and Events as an
Outcome, and effects.apply alone performs them (in order, Events only when all went through)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import urllib3

from nodemanager.api import ConfigSet
from nodemanager.controller import access, fencing, liveness
from nodemanager.controller.configsets import Memory, Settings, reconcile
from nodemanager.controller.effects import Outcome, Write, apply
from nodemanager.controller.rollout import REVISIONS_FIELD, revision_name
from nodemanager.controller.summary import NodeView
from nodemanager.kube.errors import Permanent, Temporary

NOW = "2026-01-01T12:00:00Z"
SETTINGS = Settings("ns", progress_period=5.0, requeue=1.0)


class Fleet:
    """The API server's objects as dicts; ``fail[method]`` raises that error instead."""

    def __init__(self) -> None:
        self.statuses: dict[str, dict[str, Any]] = {}
        self.revisions: dict[str, dict[str, Any]] = {}
        self.admissions: dict[str, dict[str, str]] = {}
        self.ready: dict[tuple[str, str], tuple[str, str]] = {}
        self.conditions: dict[str, list[dict[str, Any]]] = {}
        self.leases: dict[str, dict[str, Any]] = {}
        self.roles: dict[str, dict[str, Any]] = {}
        self.bindings: dict[str, dict[str, Any]] = {}
        self.fenced: list[str] = []
        self.specs: dict[str, dict[str, Any]] = {}
        self.fail: dict[str, Exception] = {}
        self.calls: list[str] = []

    def _call(self, method: str) -> None:
        self.calls.append(method)
        if method in self.fail:
            raise self.fail[method]

    def patch_configset_status(self, name: str, status: dict[str, Any]) -> None:
        self._call("patch_configset_status")
        self.statuses[name] = dict(status)

    def patch_node_conditions(self, name: str, rv: str, conditions: list[dict[str, Any]]) -> None:
        self._call("patch_node_conditions")
        self.conditions[name] = conditions

    def get_lease(self, name: str) -> dict[str, Any] | None:
        self._call("get_lease")
        return self.leases.get(name)

    def put_role(self, role: dict[str, Any]) -> None:
        self._call("put_role")
        self.roles[role["metadata"]["name"]] = role

    def create_binding(self, binding: dict[str, Any]) -> None:
        self._call("create_binding")
        self.bindings[binding["metadata"]["name"]] = binding

    def put_binding(self, binding: dict[str, Any]) -> None:
        self._call("put_binding")
        self.bindings[binding["metadata"]["name"]] = binding

    def delete_rbac(self, name: str) -> None:
        self._call("delete_rbac")
        self.roles.pop(name, None)
        self.bindings.pop(name, None)

    def create_revision(self, revision: dict[str, Any]) -> None:
        self._call("create_revision")
        self.revisions[revision["metadata"]["name"]] = revision

    def renumber_revision(self, name: str, number: int) -> None:
        self._call("renumber_revision")
        self.revisions[name]["revision"] = number

    def delete_revision(self, name: str) -> None:
        self._call("delete_revision")
        self.revisions.pop(name, None)

    def admit(self, node: str, field: str, configset: str, revision: str) -> None:
        self._call("admit")
        self.admissions.setdefault(node, {})[configset] = revision

    def unadmit(self, node: str, fields: Any, configset: str) -> None:
        self._call("unadmit")
        self.admissions.get(node, {}).pop(configset, None)

    def mark_ready(self, node: str, field: str, configset: str, revision: str, since: str) -> None:
        self._call("mark_ready")
        self.ready[(node, configset)] = (revision, since)

    def patch_node_spec(self, node: str, spec: dict[str, Any]) -> None:
        self._call("patch_node_spec")
        self.specs.setdefault(node, {}).update(spec)

    def fence(self, node: str, report: Any) -> None:
        self._call("fence")
        self.fenced.append(node)
        report("FencedNodeDeleted", f"deleted Kubernetes Node {node}")


class Events:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, involved: Any, note: Any) -> None:
        self.reasons.append(note.reason)


def configset(name: str, generation: int = 1, staged: bool = False, **status: Any) -> dict:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"role": "web"}},
        "files": [{"path": f"/etc/{name}", "content": f"v{generation}"}],
    }
    if staged:
        spec["rollout"] = {"maxUnavailable": 1}
    return {
        "metadata": {"name": name, "generation": generation, "resourceVersion": "1", "uid": "u"},
        "spec": spec,
        "status": status,
    }


def node(name: str, *entries: dict[str, Any], admitted: dict | None = None, rv: str = "5"):
    return {
        "metadata": {"name": name, "labels": {"role": "web"}, "resourceVersion": rv},
        # A host that applied something carries the controller's record of it (firstapplied).
        "spec": ({REVISIONS_FIELD: admitted} if admitted else {})
        | ({"firstApplied": "2026-01-01T10:00:00Z"} if admitted or entries else {}),
        "status": {"configsets": list(entries)},
    }


def run(raw, nodes, revisions=(), memory=None, mono=100.0):
    views = [NodeView.from_dict(n) for n in nodes]
    return reconcile(
        raw, views, nodes, list(revisions), memory or Memory(), SETTINGS, now=NOW, mono=mono
    )


def test_a_plain_configset_wants_one_status_write_and_no_second_while_the_cache_lags():
    raw = configset("web")
    nodes = [node("a", {"name": "web", "generation": 1, "error": ""})]
    memory, fleet = Memory(), Fleet()
    outcome = run(raw, nodes, memory=memory)
    assert [e.method for e in outcome.effects if isinstance(e, Write)] == ["patch_configset_status"]
    assert outcome.requeue_after is None
    result = apply(outcome, fleet)
    assert result.error is None and fleet.statuses["web"]["updated"] == 1
    memory.applied("web", result.done, 100.0, "1")
    assert run(raw, nodes, memory=memory).effects == ()  # the cache has not caught up yet
    raw["status"] = fleet.statuses["web"]
    assert run(raw, nodes, memory=memory).effects == ()  # it has


def test_a_new_staged_configset_creates_its_revision_then_admits_a_new_node_then_writes():
    raw = configset("web", staged=True)
    fleet, events = Fleet(), Events()
    outcome = run(raw, [node("a")])
    methods = [e.method for e in outcome.effects if isinstance(e, Write)]
    # A host new to the fleet is recorded as no longer new before it is admitted.
    assert methods == ["create_revision", "patch_node_spec", "admit", "patch_configset_status"]
    result = apply(outcome, fleet, events)
    assert result.error is None
    target = revision_name("web", raw["spec"])
    assert list(fleet.revisions) == [target] and fleet.admissions == {"a": {"web": target}}
    assert "NodesAdmitted" in events.reasons


def test_a_failed_write_stops_the_rest_and_says_no_event():
    raw = configset("web", staged=True)
    fleet, events = Fleet(), Events()
    fleet.fail["admit"] = Temporary("timed out")
    result = apply(run(raw, [node("a")]), fleet, events)
    assert isinstance(result.error, Temporary)
    assert fleet.calls == ["create_revision", "patch_node_spec", "admit"]
    assert fleet.statuses == {}
    assert events.reasons == []  # retried later: said once, when it works


def test_a_gone_object_skips_its_write_and_the_rest_go_on():
    fleet = Fleet()
    fleet.fail["admit"] = Permanent("404 not found", status=404)
    result = apply(run(configset("web", staged=True), [node("a")]), fleet)
    assert result.error is None and len(result.skipped) == 1 and "web" in fleet.statuses


def test_a_progress_only_write_waits_and_asks_to_be_requeued():
    raw = configset("web", staged=True)
    target = revision_name("web", raw["spec"])
    nodes = [
        node(n, {"name": "web", "generation": 1, "revision": "web-old", "error": ""},
             admitted={"web": "web-old"})
        for n in ("a", "b", "c")
    ]  # fmt: skip
    revisions = [
        {"metadata": {"name": r, "labels": {"nodemanager.io/configset": "web"}}, "revision": i}
        for i, r in enumerate(["web-old", target], start=1)
    ]
    memory, fleet = Memory(), Fleet()
    first = run(raw, nodes, revisions, memory, mono=100.0)
    memory.applied("web", apply(first, fleet).done, 100.0, "1")
    assert fleet.admissions == {"a": {"web": target}}
    nodes[0] = node("a", {"name": "web", "generation": 1, "revision": target, "error": ""},
                    admitted={"web": target})  # fmt: skip
    # a reported: its ready time is kept (whatever minReadySeconds is), the next node is
    # admitted now, the count in the status waits its period
    second = run(raw, nodes, revisions, memory, mono=101.0)
    methods = [e.method for e in second.effects if isinstance(e, Write)]
    assert methods == ["mark_ready", "admit"] and second.requeue_after == SETTINGS.requeue


def test_liveness_marks_an_expired_node_once_and_not_after_a_renewal():
    lease = {
        "spec": {
            "holderIdentity": "a",
            "renewTime": "2026-01-01T11:00:00Z",
            "leaseDurationSeconds": 40,
        }
    }
    n = node("a", rv="7")
    assert liveness.reconcile(n, lease, 30.0, None, NOW).effects == ()
    outcome = liveness.reconcile(n, lease, 41.0, None, NOW)
    fleet = Fleet()
    fleet.leases["a"] = lease
    assert apply(outcome, fleet).done and fleet.conditions["a"][0]["status"] == "Unknown"
    assert liveness.reconcile(n, lease, 99.0, "7", NOW).effects == ()  # marked at this version
    fleet = Fleet()
    fleet.leases["a"] = {"spec": {**lease["spec"], "renewTime": "2026-01-01T11:59:59Z"}}
    result = apply(outcome, fleet)
    assert result.skipped and fleet.conditions == {} and fleet.calls == ["get_lease"]


def test_a_lease_read_answered_only_after_a_hang_marks_nothing():
    lease = {
        "spec": {
            "holderIdentity": "a",
            "renewTime": "2026-01-01T11:00:00Z",
            "leaseDurationSeconds": 40,
        }
    }
    mark = liveness.reconcile(node("a"), lease, 41.0, None, NOW).effects[0]
    assert isinstance(mark, liveness.MarkUnknown)
    ticks = iter([0.0, liveness.SLOW_READ + 1])
    fleet = Fleet()
    fleet.leases["a"] = lease  # not renewed: the agents could not renew during the hang either
    result = apply(Outcome((replace(mark, clock=lambda: next(ticks)),)), fleet)
    assert result.skipped and fleet.conditions == {}


def test_no_answer_from_a_hung_server_is_a_temporary_error_not_a_crash():
    lease = {
        "spec": {
            "holderIdentity": "a",
            "renewTime": "2026-01-01T11:00:00Z",
            "leaseDurationSeconds": 40,
        }
    }
    fleet = Fleet()
    fleet.fail["get_lease"] = urllib3.exceptions.ReadTimeoutError(None, "/lease", "timed out")
    result = apply(liveness.reconcile(node("a"), lease, 41.0, None, NOW), fleet)
    assert isinstance(result.error, Temporary) and "timed out" in str(result.error)


def test_access_writes_the_role_and_binding_once():
    cs = ConfigSet.from_dict(
        {
            "metadata": {"name": "web"},
            "spec": {
                "selector": {"matchLabels": {"role": "web"}},
                "files": [{"path": "/x", "template": "t", "secretRefs": [{"name": "tls"}]}],
            },
        }
    )
    n = node("a")
    fleet = Fleet()
    outcome = access.reconcile(n, [cs], None, None, "ns")
    assert apply(outcome, fleet).error is None
    role = fleet.roles["nodemanager-refs-a"]
    bound = fleet.bindings["nodemanager-refs-a"]
    assert role["rules"][0]["resourceNames"] == ["tls"]
    assert access.reconcile(n, [cs], role, bound, "ns") == Outcome()
    # `rbac --certificate` names the node's certificate: it reads the Secret too; `revoke`
    # takes it out of rbac's binding, and out of this one.
    user = {"kind": "User", "name": "nodemanager:node:ns:a"}
    certified = {"subjects": [*bound["subjects"], user]}
    outcome = access.reconcile(n, [cs], role, bound, "ns", node_binding=certified)
    assert apply(outcome, fleet).error is None and fleet.calls[-1] == "put_binding"
    assert fleet.bindings["nodemanager-refs-a"]["subjects"][-1]["name"] == user["name"]
    revoked = fleet.bindings["nodemanager-refs-a"]
    outcome = access.reconcile(n, [cs], role, revoked, "ns", node_binding=bound)
    assert apply(outcome, fleet).error is None
    assert [s["kind"] for s in fleet.bindings["nodemanager-refs-a"]["subjects"]] == [
        "ServiceAccount"
    ]


def test_fencing_is_one_effect_per_lease_record_and_reports_each_step():
    lease = {
        "spec": {
            "holderIdentity": "a",
            "renewTime": "2026-01-01T11:00:00Z",
            "leaseDurationSeconds": 40,
        }
    }
    n = {
        "metadata": {"name": "a"},
        "spec": {"fencing": {"enabled": True, "timeoutSeconds": 30}},
        "status": {"fencing": {"armed": True}},
    }
    said: list[str] = []

    def report(node: Any, reason: str, message: str, key: str) -> None:
        said.append(reason)

    assert fencing.reconcile(n, lease, 70.0, None, report).effects == ()  # 40 + 30 not past
    outcome = fencing.reconcile(n, lease, 71.0, None, report)
    fleet = Fleet()
    fleet.leases["a"] = lease
    assert apply(outcome, fleet).done and fleet.fenced == ["a"]
    assert said == ["Fencing", "FencedNodeDeleted"]
    assert fencing.reconcile(n, lease, 999.0, "2026-01-01T11:00:00Z", report).effects == ()
    fleet = Fleet()
    fleet.leases["a"] = {"spec": {**lease["spec"], "renewTime": "2026-01-01T11:01:00Z"}}
    assert apply(outcome, fleet).skipped and fleet.fenced == []  # renewed: alive


def _seen(raw, status, rv):
    """The cache shows the ConfigSet at resourceVersion ``rv`` with ``status``."""
    raw["metadata"]["resourceVersion"] = rv
    raw["status"] = status


def test_a_status_the_cache_moved_past_is_the_base_not_the_write_remembered():
    raw = configset("web")
    nodes = [node("a", {"name": "web", "generation": 1, "error": ""})]
    memory, fleet = Memory(), Fleet()
    first = run(raw, nodes, memory=memory, mono=100.0)
    memory.applied("web", apply(first, fleet).done, 100.0, "1")
    wanted = fleet.statuses["web"]
    assert run(raw, nodes, memory=memory, mono=200.0).effects == ()  # the cache lags: no write
    # Someone else wrote the status after ours (kubectl edit, an older replica): the cache's
    # newer version is what the server holds, so ours is written again.
    _seen(raw, {**wanted, "updated": 0, "conditions": []}, "3")
    again = run(raw, nodes, memory=memory, mono=300.0)
    assert [e.method for e in again.effects] == ["patch_configset_status"]
    assert again.effects[0].args[1]["updated"] == 1


def test_a_skipped_write_or_a_recreated_configset_gets_its_status_written():
    raw = configset("web")
    nodes = [node("a", {"name": "web", "generation": 1, "error": ""})]
    memory, fleet = Memory(), Fleet()
    fleet.fail["patch_configset_status"] = Permanent("404 not found", status=404)
    skipped = run(raw, nodes, memory=memory, mono=100.0)
    result = apply(skipped, fleet)
    assert result.error is None and result.skipped and fleet.statuses == {}
    memory.applied("web", result.done, 100.0, "1")  # what the controller does after a sync
    # Deleted (the 404) and re-created under the same name before the cache showed either:
    # the new object has no status and gets one.
    _seen(raw, {}, "9")
    raw["metadata"]["uid"] = "u2"
    fresh = run(raw, nodes, memory=memory, mono=101.0)
    assert [e.method for e in fresh.effects] == ["patch_configset_status"]
