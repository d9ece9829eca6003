"""A host is new to the fleet only until the controller first saw it apply something: after
that every staged change reaches it through the budget, whatever its status holds now."""

from __future__ import annotations

from nodemanager.controller import firstapplied
from nodemanager.controller.effects import Outcome, Write, apply
from nodemanager.controller.rollout import revision_name
from nodemanager.kube.errors import Temporary
from tests.unit.controller.test_reconcile import Fleet, configset, node, run

MARK = {firstapplied.FIELD: "2026-01-01T11:00:00Z"}
ENTRY = {"name": "old", "generation": 1, "error": ""}


def marked(name, *entries, **kw):
    raw = node(name, *entries, **kw)
    raw["spec"] = {**raw["spec"], **MARK}
    return raw


def unmarked(name, *entries, **kw):
    """A host as an older controller left it: applied something, not recorded."""
    raw = node(name, *entries, **kw)
    raw["spec"].pop(firstapplied.FIELD, None)
    return raw


def writes(outcome):
    return [(e.method, e.args[0]) for e in outcome.effects if isinstance(e, Write)]


def admitted(outcome):
    return sorted(n for m, n in writes(outcome) if m == "admit")


def test_hosts_whose_status_is_empty_again_go_through_the_budget():
    # A staged ConfigSet deleted and re-created, a host's only ConfigSet replaced by another, a
    # host back from maint=true, an agent restarted: no entries, no admissions, but recorded.
    raw = configset("web", staged=True)
    outcome = run(raw, [marked(f"n{i}") for i in range(3)])
    assert admitted(outcome) == ["n0"]
    assert ("patch_node_spec", "n0") not in writes(outcome)  # recorded already


def test_a_host_that_never_applied_anything_gets_the_revision_at_once_marked_first():
    raw = configset("web", staged=True)
    outcome = run(raw, [node(f"n{i}") for i in range(3)])
    assert admitted(outcome) == ["n0", "n1", "n2"]
    order = writes(outcome)
    for n in ("n0", "n1", "n2"):  # the mark lands before the admission it records
        assert order.index(("patch_node_spec", n)) < order.index(("admit", n)), order


def test_a_failed_mark_admits_nothing_on_that_host():
    fleet = Fleet()
    fleet.fail["patch_node_spec"] = Temporary("timed out")
    result = apply(run(configset("web", staged=True), [node("n0")]), fleet)
    assert isinstance(result.error, Temporary) and fleet.admissions == {}


def test_a_host_seen_applying_is_recorded_once_per_version_and_only_when_written():
    marks = firstapplied.Marks()
    seen = unmarked("a", ENTRY, rv="7")
    (write,) = firstapplied.reconcile(seen, marks, "2026-01-01T12:00:00Z").effects
    fleet = Fleet()
    assert apply(Outcome((write,)), fleet).error is None
    assert fleet.specs == {"a": {"firstApplied": "2026-01-01T12:00:00Z"}}
    # Not confirmed (a failed write): asked again next time.
    assert firstapplied.reconcile(seen, marks, "t").effects
    marks.confirmed("a", "7")
    assert firstapplied.reconcile(seen, marks, "t").effects == ()  # the cache lags our write
    assert firstapplied.reconcile(unmarked("a", ENTRY, rv="8"), marks, "t").effects  # moved on
    assert firstapplied.reconcile(marked("a", ENTRY), marks, "t").effects == ()
    assert firstapplied.reconcile(node("b"), marks, "t").effects == ()  # nothing applied yet
    admitted_only = unmarked("c", admitted={"web": revision_name("web", {})})
    assert firstapplied.reconcile(admitted_only, marks, "t").effects
