"""The reconciler with its executor swapped for a recording one: what runs, and what status says."""

from nodemanager.agent.metrics import Metrics
from nodemanager.agent.reconcile import Reconciler
from nodemanager.agent.state import Snapshot, StateStore
from nodemanager.executor.errors import MissingModules
from nodemanager.executor.events import TaskResult
from nodemanager.executor.run import RunResult


def configset(name, path, content, rv="1"):
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "generation": 1},
        "spec": {"selector": {}, "files": [{"path": path, "content": content}]},
    }


def reconciler(tmp_path, run):
    return Reconciler(
        name="n1",
        managed_labels={"kubernetes.io/hostname": "n1"},
        family="debian",
        store=StateStore(str(tmp_path / "state")),
        metrics=Metrics(),
        agent_version="t",
        observe=lambda: {},
        run=run,
        clock=lambda: "2026-01-01T00:00:00Z",
    )


def snapshot(*configsets):
    return Snapshot(
        node={"metadata": {"name": "n1", "labels": {}, "generation": 1}},
        configsets=list(configsets),
    )


def entry(result, name):
    return next(e for e in result.status["configsets"] if e["name"] == name)


def test_only_the_changed_resource_runs_and_nothing_when_nothing_changed(tmp_path):
    runs: list[list[str]] = []

    def run(plan, **_):
        tasks = [t["name"] for play in plan.playbook for t in play["tasks"]]
        runs.append(tasks)
        return RunResult(
            "successful",
            0,
            tuple(
                TaskResult(t, plan.origins[t].resource, plan.origins[t].configsets, "changed")
                for t in tasks
            ),
        )

    r = reconciler(tmp_path, run)
    a, b = configset("a", "/a", "1"), configset("b", "/b", "1")
    first = r.reconcile(snapshot(a, b), full=True)
    assert (
        runs == [["ConfigSet a | file /a", "ConfigSet b | file /b"]]
        and entry(first, "a")["error"] == ""
    )
    assert (
        r.reconcile(snapshot(a, b), full=False).ran is False and len(runs) == 1
    )  # nothing changed: no run
    r.reconcile(snapshot(a, configset("b", "/b", "2", rv="2")), full=False)
    assert runs[-1] == ["ConfigSet b | file /b"]


def test_executor_that_cannot_start_is_reported_on_the_configsets_it_concerned(tmp_path):
    def broken(plan, **_):
        raise MissingModules(["community.general.pacman"], "/collections")

    r = reconciler(tmp_path, broken)
    result = r.reconcile(snapshot(configset("a", "/a", "1")), full=False)
    assert result.failed and result.requeue_after
    assert entry(result, "a")["error"].startswith(
        "Ansible modules not installed: community.general.pacman"
    )


def test_failures_are_retried_with_growing_backoff_reset_by_a_change(tmp_path):
    def failing(plan, **_):
        tasks = [t["name"] for play in plan.playbook for t in play["tasks"]]
        return RunResult(
            "failed",
            2,
            tuple(
                TaskResult(t, plan.origins[t].resource, plan.origins[t].configsets, "failed", "no")
                for t in tasks
            ),
        )

    r = reconciler(tmp_path, failing)
    r.retry._rand = lambda low, high: high
    delays = [r.reconcile(snapshot(configset("a", "/a", "1")), full=False) for _ in range(4)]
    assert [d.requeue_after for d in delays] == [5, 10, 20, 40]
    assert entry(delays[0], "a")["error"] == "file:/a: no"
    changed = r.reconcile(snapshot(configset("a", "/a", "2", rv="2")), full=False)
    assert changed.requeue_after == 5  # new inputs: a prompt retry


def test_an_invalid_configset_for_this_node_is_in_its_status_with_the_field(tmp_path):
    bad = configset("bad", "/b", "1")
    bad["spec"]["files"][0]["mode"] = "rw"
    not_mine = configset("other", "/o", "1")
    not_mine["spec"] = {"selector": {"matchLabels": {"role": "db"}}, "files": [{"path": "x"}]}
    r = reconciler(tmp_path, lambda plan, **_: RunResult("successful", 0, ()))
    result = r.reconcile(snapshot(configset("a", "/a", "1"), bad, not_mine), full=True)
    names = [e["name"] for e in result.status["configsets"]]
    assert names == ["a", "bad"] and result.failed
    assert entry(result, "bad")["error"].startswith("InvalidSpec: spec.files[0].mode:")
