"""One result per ConfigSet from task outcomes and planning errors."""

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor.events import TaskResult
from nodemanager.executor.summary import summarize


def cs(name, *paths):
    return ConfigSet.from_dict(
        {
            "metadata": {"name": name, "resourceVersion": "7", "generation": 3},
            "spec": {"selector": {}, "files": [{"path": p, "content": name} for p in paths]},
        }
    )


def test_counts_failures_and_conflicts_per_configset():
    desired = merge([cs("a", "/x", "/y", "/shared"), cs("b", "/z", "/shared")])
    results = (
        TaskResult("a | file /x", "file:/x", ("a",), "changed"),
        TaskResult("a | file /x (mode)", "file:/x", ("a",), "ok"),  # the worst outcome counts
        TaskResult("b | file /z", "file:/z", ("b",), "failed", "denied"),
    )
    out = summarize(desired, results, {"file:/y": "TemplateError: spec.files[1].template: x"})
    a, b = out["a"], out["b"]
    assert (a.ok, a.changed, a.failed, a.resource_version, a.generation) == (0, 1, 1, "7", 3)
    assert a.errors == ["file:/y: TemplateError: spec.files[1].template: x"]
    assert b.error == "file:/z: denied" and b.conflicts == ["file:/shared"] == a.conflicts
