"""Ready is honest: False while a conflict leaves a resource applied from neither ConfigSet."""

from __future__ import annotations

from nodemanager.agent.status import compute
from nodemanager.executor.summary import ConfigSetResult, Failure


def conditions(outcomes: list[ConfigSetResult]) -> dict[str, dict[str, str]]:
    status = compute(
        observed={},
        agent_version="t",
        outcomes=outcomes,
        previous={},
        generation=1,
        now="2026-11-23T00:00:00Z",
    )
    return {c["type"]: c for c in status["conditions"]}


def test_conflict_makes_ready_false_and_names_the_resource():
    c = conditions(
        [
            ConfigSetResult("a", "1", conflicts=["file:/etc/motd"]),
            ConfigSetResult("b", "2", conflicts=["file:/etc/motd"]),
        ]
    )
    assert c["Ready"]["status"] == "False" and c["Ready"]["reason"] == "Conflicted"
    assert "file:/etc/motd" in c["Ready"]["message"]
    assert c["Conflicted"]["status"] == "True" and c["Applied"]["status"] == "True"


def test_clean_apply_is_ready_and_a_failure_is_not():
    assert conditions([ConfigSetResult("a", "1")])["Ready"]["status"] == "True"
    failed = conditions(
        [ConfigSetResult("a", "1", failures=[Failure("package:x", "no such package")])]
    )
    assert failed["Ready"]["reason"] == "ApplyFailed" and failed["Degraded"]["status"] == "True"
