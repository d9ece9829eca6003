"""/metrics is label-compatible with upstream: node, result=success|error, operation, the
applied resourceVersion gauge, process metrics, and no _created series."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nodemanager.agent.metrics import Metrics
from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor.events import TaskResult

SPEC = {
    "packages": [{"name": "vim"}, {"name": "nano", "ensure": "absent"}],
    "files": [{"path": "/etc/motd", "content": "hi\n"}],
    "services": [{"name": "sshd", "ensure": "running", "enable": True}],
}


def samples(metrics: Metrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = generate_latest(metrics.registry).decode()
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_upstream_labels_and_operations():
    m = Metrics(node="web-1")
    desired = merge([ConfigSet.from_dict({"metadata": {"name": "base"}, "spec": SPEC})])
    m.record_results(
        [
            TaskResult("base | package vim", "package:vim", ("base",), "changed"),
            TaskResult("base | package nano", "package:nano", ("base",), "failed", "locked"),
            TaskResult("base | file /etc/motd", "file:/etc/motd", ("base",), "changed"),
            TaskResult("base | service sshd", "service:sshd", ("base",), "changed"),
            TaskResult("base | service sshd enabled", "service:sshd", ("base",), "ok"),
            TaskResult("base | restart", "service:sshd", ("base",), "changed", handler=True),
        ],
        desired,
    )
    m.configset_applied("base", "41", error=False)
    m.configset_applied("web", "7", error=True)
    m.reconciled("failed")
    got = samples(m)

    assert ({"node": "web-1", "operation": "install", "result": "success"}, 1.0) in got[
        "nodemanager_package_operations_total"
    ]
    assert ({"node": "web-1", "operation": "remove", "result": "error"}, 1.0) in got[
        "nodemanager_package_operations_total"
    ]
    ops = {s[0]["operation"] for s in got["nodemanager_service_operations_total"]}
    assert ops == {"start", "restart"}  # the unchanged enable is no operation
    assert got["nodemanager_file_changes_total"] == [
        ({"node": "web-1", "configset": "base", "result": "success"}, 1.0)
    ]
    applies = {s[0]["configset"]: s[0] for s in got["nodemanager_configset_apply_total"]}
    assert applies["base"]["result"] == "success" and applies["web"]["result"] == "error"
    assert all(s[0]["node"] == "web-1" for s in got["nodemanager_configset_apply_total"])
    assert got["controller_runtime_reconcile_errors_total"] == [({"controller": "managednode"}, 1)]


def test_applied_resource_version_keeps_one_series_per_configset():
    m = Metrics(node="web-1")
    m.configset_applied("base", "41", error=False)
    m.configset_applied("base", "42", error=False)
    series = samples(m)["nodemanager_configset_applied_resource_version"]
    assert [s[0]["resource_version"] for s in series] == ["42"]


def test_process_metrics_and_no_created_series():
    got = samples(Metrics(node="n"))
    assert "process_resident_memory_bytes" in got and "process_cpu_seconds_total" in got
    assert not [name for name in got if name.endswith("_created")]
