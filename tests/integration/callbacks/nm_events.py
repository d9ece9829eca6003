"""An Ansible callback for plain ansible-playbook runs in the differential tests: each task
outcome as one JSON line in events.jsonl of ansible-playbook's working directory, shaped as
ansible-runner's events are, so the test reads it with the executor's own ``to_result``. It
only records. Enabled by an ansible.cfg in that directory, not by variables: the executions
under test would see those (and the environment is one of the things compared)."""

from __future__ import annotations

import json

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "nm_events"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, event: str, result) -> None:
        data = {"task": result._task.get_name(), "res": result._result}
        with open("events.jsonl", "a", encoding="utf-8") as f:
            # Lone surrogates (a file's bytes that are not UTF-8) stay as JSON escapes.
            f.write(json.dumps({"event": event, "event_data": data}, default=str) + "\n")

    def v2_runner_on_ok(self, result) -> None:
        self._record("runner_on_ok", result)

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._record("runner_on_failed", result)

    def v2_runner_on_skipped(self, result) -> None:
        self._record("runner_on_skipped", result)

    def v2_runner_on_unreachable(self, result) -> None:
        self._record("runner_on_unreachable", result)
