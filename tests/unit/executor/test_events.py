"""ansible-runner events -> TaskResults: status words, messages, and nothing from Secret tasks."""

from nodemanager.executor.events import to_result
from nodemanager.playbook.plan import TaskOrigin

ORIGINS = {
    "base | file /etc/motd": TaskOrigin("file:/etc/motd", ("base",)),
    "base | file /etc/secret": TaskOrigin("file:/etc/secret", ("base",), secret=True),
}


def event(kind, task, **res):
    return {"event": kind, "event_data": {"task": task, "res": res, "resolved_action": "copy"}}


def test_ok_changed_failed_and_skipped_carry_resource_and_configsets():
    ok = to_result(event("runner_on_ok", "base | file /etc/motd"), ORIGINS)
    changed = to_result(event("runner_on_ok", "base | file /etc/motd", changed=True), ORIGINS)
    failed = to_result(event("runner_on_failed", "base | file /etc/motd", msg="denied"), ORIGINS)
    skipped = to_result(event("runner_on_skipped", "base | file /etc/motd"), ORIGINS)
    assert [r.status for r in (ok, changed, failed, skipped)] == [
        "ok",
        "changed",
        "failed",
        "skipped",
    ]
    assert failed.resource == "file:/etc/motd" and failed.configsets == ("base",)
    assert failed.message == "denied" and failed.module == "copy"


def test_a_failed_command_says_what_ran_and_how_it_exited():
    r = to_result(event("runner_on_failed", "base | file /etc/motd", cmd=["false"], rc=1), ORIGINS)
    assert r.message == "false exited 1"


def test_diff_is_unified_and_never_shown_for_secret_tasks():
    diff = {"before": "a\n", "after": "b\n", "before_header": "/etc/motd"}
    r = to_result(event("runner_on_ok", "base | file /etc/motd", changed=True, diff=diff), ORIGINS)
    assert "-a\n+b\n" in r.diff
    s = to_result(
        event("runner_on_failed", "base | file /etc/secret", msg="s3cret", diff=diff), ORIGINS
    )
    assert s.diff == "" and "s3cret" not in s.message and s.message.startswith("output hidden")


def test_other_events_are_not_results_and_unknown_tasks_are_named_so():
    assert to_result({"event": "playbook_on_start", "event_data": {}}, ORIGINS) is None
    r = to_result(event("runner_on_ok", "who knows"), ORIGINS)
    assert r.resource == "unknown" and r.message == ""
