"""deploy/monitoring: upstream's alert names, each with a runbook in the repository, and every
series the rules and the dashboard query is one the agent exports, with the labels used."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from nodemanager.agent.metrics import Metrics
from nodemanager.executor.events import TaskResult

ROOT = Path(__file__).resolve().parents[2]
RULES = yaml.safe_load((ROOT / "deploy" / "monitoring" / "nodemanager-alerts.yaml").read_text())
DASHBOARD = json.loads((ROOT / "deploy" / "monitoring" / "nodemanager-dashboard.json").read_text())
SERIES = re.compile(r"\b((?:nodemanager|controller_runtime|process)_[a-z_]+)(\{[^}]*\})?")


def exported() -> dict[str, set[str]]:
    """Series name -> label names, from a Metrics that saw one of everything."""
    m = Metrics(node="n")
    m.configset_applied("cs", "1", error=False)
    m.configset_applied("cs2", "1", error=True)
    m.conflicts(["cs"])
    m.reconciled("failed")
    m.observe_run(1.0, ["cs"])
    m.upgrades.labels("n", "error").inc()
    m.cordoned.labels("n").set(1)
    m.pressure.labels("n", "memory", "some", "10s").set(0)
    m.record_results(
        [
            TaskResult("t", "file:/a", ("cs",), "changed"),
            TaskResult("t", "package:a", ("cs",), "changed"),
            TaskResult("t", "service:a", ("cs",), "changed"),
        ]
    )
    out: dict[str, set[str]] = {}
    text = generate_latest(m.registry).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def queried(expr: str) -> list[tuple[str, set[str]]]:
    found = []
    for name, selector in SERIES.findall(expr):
        labels = set(re.findall(r"(\w+)\s*=~?", selector or ""))
        found.append((name, labels - {"job", "instance"}))  # added by the scrape
    return found


def test_upstream_alert_names_with_runbooks():
    alerts = {r["alert"]: r for g in RULES["groups"] for r in g["rules"]}
    assert {
        "NodeManagerConfigSetApplyError",
        "NodeManagerReconcileErrors",
        "NodeManagerUpgradeFailed",
    } <= set(alerts)
    for rule in alerts.values():
        assert (ROOT / rule["annotations"]["runbook_url"]).is_file(), rule["alert"]


def test_every_queried_series_is_exported_with_its_labels():
    series = exported()
    exprs = [r["expr"] for g in RULES["groups"] for r in g["rules"]]
    exprs += [t["expr"] for p in DASHBOARD["panels"] for t in p["targets"]]
    for expr in exprs:
        for name, labels in queried(expr):
            assert name in series, f"{name} (in {expr!r}) is not exported"
            assert labels <= series[name], f"{name}: {labels - series[name]} not exported"
