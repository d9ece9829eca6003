"""A plan as a standard Ansible role (`render --role DIR`), for a team's own playbooks.

The same tasks and handlers `render` prints (render.playbook, exported), laid out as a role:
``tasks/main.yml``, ``handlers/main.yml``, ``meta/argument_specs.yml`` and ``meta/main.yml``,
large content in ``files/`` (copied with ``src:``, the same bytes), and a README naming the
ConfigSets it came from. What the play said is the including play's to say: the README names
it (``force_handlers``, the connection). Secret-fed content is never in it: such a file's
content is an argument of the role (declared in the argument spec, `no_log` in its task), a
vault variable in the team's playbook. Returns file contents; writing them is the CLI's. No I/O.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from nodemanager.playbook import render
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.plan import Plan

# Content longer than this goes to files/ (a reader scrolls past a task, not a megabyte).
FILES_ABOVE = 4096
# The role's name and its variables' prefix (ansible-lint's var-naming wants the role's name).
ROLE_PREFIX = "nodemanager"


@dataclass(frozen=True)
class RoleFile:
    path: str  # relative to the role's directory
    data: bytes
    private: bool = False  # holds nothing secret, but written 0600 like a playbook with secrets


def secret_var(path: str) -> str:
    """The role argument holding the content of the Secret-fed file at ``path``."""
    return f"{ROLE_PREFIX}_content_" + hashlib.sha256(path.encode()).hexdigest()[:12]


def role(plan: Plan) -> list[RoleFile]:
    """The files of the role doing what ``plan`` does (render's playbook, as a role)."""
    files: list[RoleFile] = []
    secrets: dict[str, str] = {}  # argument name -> path
    steps = []
    for step in plan.steps:
        if step.kind == "write" and step.origin.secret:
            secrets[secret_var(step.path)] = step.path
        elif step.kind == "write" and step.content is not None and len(step.content) > FILES_ABOVE:
            name = f"{len(files)}-{step.path.rstrip('/').rpartition('/')[2] or 'content'}"
            files.append(RoleFile(f"files/{name}", step.content.encode()))
            step = replace(step, content_file=name)
        steps.append(step)
    play = render.playbook(replace(plan, steps=tuple(steps)), agent=False)[0]
    tasks = [_role_task(t, secrets) for t in play["tasks"]]
    out = [
        RoleFile("tasks/main.yml", to_yaml(tasks, pretty=True).encode()),
        RoleFile("meta/argument_specs.yml", _argument_specs(plan, secrets).encode()),
        RoleFile("meta/main.yml", _meta(plan).encode()),
        RoleFile("README.md", _readme(plan, secrets).encode()),
        *files,
    ]
    if play.get("handlers"):
        handlers = to_yaml(play["handlers"], pretty=True)
        out.insert(1, RoleFile("handlers/main.yml", handlers.encode()))
    return out


def _role_task(item: dict[str, Any], secrets: dict[str, str]) -> dict[str, Any]:
    """A play task as the role's: spilled content copied from files/, Secret-fed content from
    its argument."""
    if "block" in item:
        return {**item, "block": [_role_task(t, secrets) for t in item["block"]]}
    copy = item.get("ansible.builtin.copy")
    if not copy:
        return item
    if "vars" in item and "nodemanager_spilled" in item["vars"]:
        params = {k: v for k, v in copy.items() if k != "content"}
        params = {"src": item["vars"]["nodemanager_spilled"], **params}
        rest = {k: v for k, v in item.items() if k not in ("vars", "ansible.builtin.copy")}
        return {**rest, "ansible.builtin.copy": params}
    arg = next((a for a, p in secrets.items() if p == copy.get("dest")), None)
    if arg is not None:
        return {**item, "ansible.builtin.copy": {**copy, "content": "{{ " + arg + " }}"}}
    return item


def _argument_specs(plan: Plan, secrets: dict[str, str]) -> str:
    options = {
        arg: {
            "type": "str",
            "required": True,
            "no_log": True,
            "description": f"The content of {path} (from a Secret: never in the role).",
        }
        for arg, path in secrets.items()
    }
    main: dict[str, Any] = {
        "short_description": f"What nodemanager applies to {plan.node}",
        "description": [f"Rendered by nodemanager from the ConfigSets {_names(plan)}."],
        "options": options,
    }
    return to_yaml({"argument_specs": {"main": main}}, pretty=True)


def _meta(plan: Plan) -> str:
    info = {
        "galaxy_info": {
            "author": "nodemanager",
            "description": f"What nodemanager applies to {plan.node}",
            "license": "Apache-2.0",
            "min_ansible_version": "2.17",
            "platforms": [{"name": "GenericLinux", "versions": ["all"]}],
        },
        "dependencies": [],
    }
    return to_yaml(info, pretty=True)


def _names(plan: Plan) -> str:
    return ", ".join(cs.name for cs in plan.desired.configsets) or "(none)"


def _readme(plan: Plan, secrets: dict[str, str]) -> str:
    lines = [
        f"# {ROLE_PREFIX}: what nodemanager applies to {plan.node}",
        "",
        f"Rendered by `nodemanager render --role` from the ConfigSets: {_names(plan)}.",
        "Render it again rather than editing it.",
        "",
        "Use it from a play with `ansible.builtin.include_role` (`name: " + ROLE_PREFIX + "`).",
        "Set `force_handlers: true` on that play: a service whose file changed is restarted",
        "even when another resource failed, as nodemanager does. Each task is a block whose",
        "rescue goes on, so one failing resource does not stop the others.",
    ]
    if secrets:
        lines += ["", "Arguments (content from Secrets, never in the role; use a vault):", ""]
        lines += [f"- `{arg}`: the content of `{path}`" for arg, path in sorted(secrets.items())]
    return "\n".join(lines) + "\n"
