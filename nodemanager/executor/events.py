"""Turn ansible-runner events into TaskResults tagged with their resource and ConfigSets.

The plan's table of task names is the only mapping used: a task the plan does not know (there
should be none) is reported under the resource "unknown" rather than guessed.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from nodemanager.playbook.plan import TaskOrigin
from nodemanager.playbook.steps import user_argv

TaskStatus = Literal["ok", "changed", "failed", "skipped"]

# ansible-runner event -> our status word; runner_on_ok becomes "changed" when the module says so.
_STATUS: dict[str, TaskStatus] = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "failed",
    "runner_on_skipped": "skipped",
}


@dataclass(frozen=True)
class TaskResult:
    task: str
    resource: str
    configsets: tuple[str, ...]
    status: TaskStatus
    message: str = ""
    diff: str = ""
    handler: bool = False
    module: str = ""


def _message(res: Mapping[str, Any]) -> str:
    for key in ("msg", "stderr", "module_stderr", "reason"):
        value = res.get(key)
        if value:
            return str(value).strip()
    if res.get("cmd"):  # a command failed silently: say which, and how
        cmd = res["cmd"]
        cmd = cmd if isinstance(cmd, str) else " ".join(user_argv([str(w) for w in cmd]))
        return f"{cmd} exited {res.get('rc')}"
    return ""


def headers(path: str) -> tuple[str, str]:
    """The headers of a file's content diff, the same on both paths (Ansible's own name a
    temporary file of its run)."""
    return f"before: {path}", f"after: {path}"


def _printable(text: Any) -> Any:
    """Ansible's text of a file that is not UTF-8 keeps the bytes as lone surrogates, which no
    terminal can print: shown as U+FFFD instead, as the fast path decodes the same bytes."""
    if not isinstance(text, str):
        return text
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


def module_diff(res: Mapping[str, Any], resource: str) -> str:
    """The unified diff of a module result's ``diff`` (one or a list of before/after)."""
    diffs = res.get("diff") or []
    if isinstance(diffs, dict):
        diffs = [diffs]
    out: list[str] = []
    for d in diffs:
        if d.get("src_larger") or d.get("dst_larger") or d.get("src_binary") or d.get("dst_binary"):
            continue  # Ansible left the content out: there is no diff to show
        before, after = _printable(d.get("before", "")), _printable(d.get("after", ""))
        if isinstance(before, str) and isinstance(after, str) and before != after:
            old, new = (
                headers(resource.partition(":")[2])
                if resource.startswith("file:")
                else (str(d.get("before_header", "before")), str(d.get("after_header", "after")))
            )
            out.extend(
                difflib.unified_diff(
                    before.splitlines(keepends=True),
                    after.splitlines(keepends=True),
                    fromfile=old,
                    tofile=new,
                )
            )
        elif d.get("prepared"):
            out.append(str(d["prepared"]))
    return "".join(out)


def to_result(event: Mapping[str, Any], origins: Mapping[str, TaskOrigin]) -> TaskResult | None:
    """The TaskResult of one runner event, or None for events that are not task outcomes."""
    status = _STATUS.get(event.get("event", ""))
    if status is None:
        return None
    data = event.get("event_data", {})
    name = data.get("task", "")
    origin = origins.get(name)
    res = data.get("res") or {}
    if status == "ok" and res.get("changed"):
        status = "changed"
    secret = origin.secret if origin else True
    return TaskResult(
        task=name,
        resource=origin.resource if origin else "unknown",
        configsets=origin.configsets if origin else (),
        status=status,
        # no_log results are censored by Ansible already; never carry anything from them.
        message=""
        if secret and status != "failed"
        else ("output hidden: task handles a Secret" if secret else _message(res)),
        diff="" if secret else module_diff(res, origin.resource if origin else ""),
        handler=origin.handler if origin else False,
        module=str(data.get("resolved_action") or data.get("task_action") or ""),
    )
