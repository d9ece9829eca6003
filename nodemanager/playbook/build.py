"""Build the playbook for one node as Python data.

Every task is named ``<configsets> | <kind> <key>`` and the plan keeps a table from task name to
the resource and ConfigSets it came from, so the executor maps events back without parsing
names. Files notify the handlers of the services and executions that subscribe to them; handlers
run executions first (a ``daemon-reload`` belongs before restarts), then service restarts.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nodemanager.api import Execution, File, Package, Service
from nodemanager.desired.merge import DesiredState, Resource
from nodemanager.desired.templates import Rendered
from nodemanager.playbook import platforms
from nodemanager.playbook.dump import Unsafe
from nodemanager.playbook.literal import NotLiteral, literal_env
from nodemanager.playbook.steps import EXEC_PATH, Origin, Step, StepKind, exec_argv

REDACTED = "<redacted: from a Secret; render --show-secrets to see it>"
# Task keys that are Ansible keywords; the one other key of a task is its module.
TASK_KEYWORDS = frozenset(
    {
        "name",
        "listen",
        "notify",
        "ignore_errors",
        "no_log",
        "diff",
        "when",
        "register",
        "tags",
        "vars",
        "changed_when",
        "become",
        "become_user",
        "become_method",
        "environment",
    }
)
# services[].user: the user's runtime directory, where `systemctl --user` finds its manager. The
# name comes in through a task variable holding the Unsafe value, shell-quoted for `id`.
USER_VAR = "nodemanager_user"
USER_PYTHON = "/usr/bin/python3"
USER_RUNTIME_DIR = (
    "/run/user/{{ lookup('ansible.builtin.pipe', 'id -u -- ' ~ (nodemanager_user | quote)) }}"
)


def module_of(task: Mapping[str, Any]) -> tuple[str, Any]:
    """The module a task calls and its parameters."""
    (module,) = [k for k in task if k not in TASK_KEYWORDS]
    return module, task[module]


TaskOrigin = Origin  # the name the executor and agent know


@dataclass(frozen=True)
class Plan:
    """The playbook as data plus where each of its tasks came from."""

    playbook: list[dict[str, Any]]
    origins: Mapping[str, TaskOrigin]
    desired: DesiredState
    family: str
    errors: Mapping[str, str] = field(
        default_factory=dict
    )  # resource id -> why it has no task here
    steps: tuple[Step, ...] = ()  # one per task and handler, tasks in play order, then handlers

    def tasks(self) -> list[Step]:
        """The steps of the play's tasks, in play order."""
        names = {t["name"] for play in self.playbook for t in play["tasks"]}
        return [s for s in self.steps if s.task in names and not s.origin.handler]

    def handlers(self) -> list[Step]:
        """The steps of the play's handlers, in handler order (the order they run in)."""
        return [s for s in self.steps if s.origin.handler]

    @property
    def has_secrets(self) -> bool:
        return any(o.secret for o in self.origins.values())

    def resource_digests(self) -> dict[str, str]:
        """A digest per resource of every task and handler it contributes: what changed is
        what needs to run."""
        hashes: dict[str, Any] = {}
        for play in self.playbook:
            for task in [*play["tasks"], *play.get("handlers", [])]:
                origin = self.origins[task["name"]]
                # JSON, not YAML: same content, a hundred times cheaper on the idle path. A large
                # value (file content) is hashed where it stands: its JSON text, joined and
                # encoded, would cost three more copies of it (+120 MB for 50 MB of content).
                text = json.dumps(_digested(task), sort_keys=True)
                hashes.setdefault(origin.resource, hashlib.sha256()).update(text.encode())
        return {rid: h.hexdigest() for rid, h in hashes.items()}

    def only(self, resources: set[str]) -> Plan:
        """The same plan with only the tasks of ``resources``; every handler stays (handlers run
        only when notified, so a subscribed service restarts only when its file changed)."""
        plays = []
        for play in self.playbook:
            kept = [t for t in play["tasks"] if self.origins[t["name"]].resource in resources]
            plays.append({**play, "tasks": kept})
        steps = tuple(s for s in self.steps if s.origin.handler or s.origin.resource in resources)
        return replace(self, playbook=plays, steps=steps)


# The step kind of each file skeleton in playbook_templates/files.yaml.
FILE_FORMS: dict[str, StepKind] = {
    "content": "write",
    "file": "touch",
    "directory": "directory",
    "symlink": "symlink",
    "absent": "absent",
    "purge": "purge",
}

# Values the renderer chooses itself (module state words, the file guard); everything else
# came from a ConfigSet.
TRUSTED = frozenset({"state", "guard"})
# A file's path, failing with this message when a directory is there (playbook_templates/
# files.yaml): `is directory` follows symlinks, as copy and touch do; the local connection
# makes the controller's test the host's.
FILE_GUARD = (
    "{{ nodemanager_path if nodemanager_path is not directory else nodemanager_no_path"
    " | ansible.builtin.mandatory(nodemanager_path ~ ' is a directory: ensure: file cannot"
    " make it a file') }}"
)


# Strings longer than this go into a resource digest as their own SHA-256.
_DIGEST_WHOLE = 1 << 16
_CHUNK = 1 << 20


def _digested(value: Any) -> Any:
    """``value`` with every long string replaced by a tagged SHA-256 of its UTF-8 bytes,
    encoded a chunk at a time."""
    if isinstance(value, str) and len(value) > _DIGEST_WHOLE:
        h = hashlib.sha256()
        for at in range(0, len(value), _CHUNK):
            h.update(value[at : at + _CHUNK].encode())
        return {"nodemanager/sha256": h.hexdigest()}
    if isinstance(value, dict):
        return {k: _digested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_digested(v) for v in value]
    return value


def fill(skeleton: Any, values: Mapping[str, Any]) -> Any:
    """Replace "$name" strings in a skeleton with ``values[name]``; drop parameters left unset.

    ConfigSet values come back ``Unsafe`` so Ansible never templates them.
    """
    if isinstance(skeleton, dict):
        out = {}
        for k, v in skeleton.items():
            filled = fill(v, values)
            if filled is not None:
                out[k] = filled
        return out
    if isinstance(skeleton, str) and skeleton.startswith("$"):
        key = skeleton[1:]
        return values.get(key) if key in TRUSTED else _unsafe(values.get(key))
    return copy.deepcopy(skeleton)


def _unsafe(value: Any) -> Any:
    if isinstance(value, str):
        # Ansible 2.19 loads an empty `!unsafe ''` as null; an empty string has nothing to template.
        return Unsafe(value) if value else value
    if isinstance(value, (list, tuple)):
        return [_unsafe(v) for v in value]
    return value


# The name of the task reporting a no_log task's outcome, the variable it reads.
REPORTED = "{task} | reported"


def _reported_var(task: str) -> str:
    return "nodemanager_secret_" + hashlib.sha256(task.encode()).hexdigest()[:12]


def _topic(path: str) -> str:
    return f"nodemanager changed {path}"


def _started_var(service: str) -> str:
    """The variable a service's start task registers: an identifier whatever the name."""
    return "nodemanager_started_" + hashlib.sha256(service.encode()).hexdigest()[:12]


class _Builder:
    def __init__(
        self,
        desired: DesiredState,
        family: str,
        contents: Mapping[str, Rendered],
        show_secrets: bool,
    ):
        self.desired = desired
        self.family = family
        self.contents = contents
        self.show_secrets = show_secrets
        self.origins: dict[str, TaskOrigin] = {}
        self.steps: dict[str, Step] = {}
        self.errors: dict[str, str] = {}
        self.listened: set[str] = set()
        self.restartable: set[str] = set()  # resources with a restart handler

    def field_of(self, r: Resource) -> str:
        """Where the first ConfigSet declaring ``r`` declares it, e.g. ``spec.files[2]``: carried
        from merging (``Resource.fields``), not searched again."""
        return r.field

    def task(
        self,
        resource: Resource,
        module_call: dict[str, Any],
        *,
        kind: StepKind,
        step: Mapping[str, Any] | None = None,
        label: str | None = None,
        secret: bool = False,
        handler: bool = False,
        listen: list[str] | None = None,
        notify: list[str] | None = None,
        register: str | None = None,
        when: str | None = None,
    ) -> dict[str, Any]:
        owners = " + ".join(resource.configsets)
        name = f"{owners} | {label or resource.kind + ' ' + resource.key}"
        origin = TaskOrigin(
            resource.id,
            resource.configsets,
            field=self.field_of(resource),
            handler=handler,
            secret=secret,
        )
        self.origins[name] = origin
        self.steps[name] = Step(
            kind,
            name,
            origin,
            module_of(module_call)[0],
            **(step or {}),
            notify=tuple(notify or ()),
            listen=tuple(listen or ()),
            conditional=when is not None,
        )
        task: dict[str, Any] = {"name": Unsafe(name), **module_call}
        if listen:
            task["listen"] = [Unsafe(t) for t in listen]
        if notify:
            task["notify"] = [Unsafe(t) for t in notify]
        if register or secret:
            task["register"] = register or _reported_var(name)
        if when:
            task["when"] = when
        # One failing resource must not stop the others; its failure is still reported.
        task["ignore_errors"] = True
        if secret:
            task["no_log"] = True
            task["diff"] = False
        return task

    # -- resources -----------------------------------------------------------------------

    def package(self, r: Resource, p: Package) -> dict[str, Any] | None:
        refused = platforms.unsupported(self.family)
        if refused:
            self.errors[r.id] = f"spec.packages: {refused}"
            return None
        sk = platforms.for_family("packages", self.family)
        name = sk["version"].format(name=p.name, version=p.version) if p.version else p.name
        state = sk["states"][p.ensure]
        return self.task(
            r,
            fill(sk["task"], {"name": name, "state": state}),
            kind="package",
            step={"name": name, "state": state},
        )

    def file(self, r: Resource, f: File) -> list[dict[str, Any]]:
        keep = sorted(
            o.key
            for o in self.desired.of_kind("file")
            if f.purge and o.key.startswith(f.path.rstrip("/") + "/")
        )
        try:  # `$HOME` and `~` mean themselves: the modules' environment keeps them so
            literal = literal_env([f.path, *([f.target] if f.target else []), *keep])
        except NotLiteral as e:
            self.errors[r.id] = f"{r.field or 'spec.files'}: {e}"
            return []
        return self.file_tasks(r, f, keep, {k: Unsafe(v) for k, v in literal.items()})

    def file_tasks(
        self, r: Resource, f: File, keep: list[str], literal: dict[str, Unsafe]
    ) -> list[dict[str, Any]]:
        notify = [_topic(f.path)] if _topic(f.path) in self.listened else None
        secret = f.uses_secrets or bool(self.contents.get(f.path) and self.contents[f.path].secret)
        values: dict[str, Any] = {
            "path": f.path,
            "guard": FILE_GUARD,
            "owner": f.owner,
            "group": f.group,
            "target": f.target,
            # Content fed by a Secret is private unless the ConfigSet says otherwise.
            "mode": f.mode or ("0600" if secret else None),
            "force": False if f.create_only else None,
        }
        form = f.ensure
        step: dict[str, Any] = {
            k: values[k] for k in ("path", "owner", "group", "mode", "target") if values[k]
        }
        step["create_only"] = f.create_only
        if f.ensure == "file" and (f.content is not None or f.template is not None):
            form = "content"
            text = f.content if f.content is not None else self.contents[f.path].text
            values["content"] = REDACTED if secret and not self.show_secrets else text
            step["content"] = None if secret and not self.show_secrets else text
        main = self.task(
            r,
            fill(platforms.skeletons("files")[form], values),
            kind=FILE_FORMS[form],
            step=step,
            secret=secret,
            notify=notify,
        )
        if literal:
            main["environment"] = literal
        tasks = [main, *([self.reporter(main["name"])] if secret else [])]
        if f.purge:
            call = fill(platforms.skeletons("files")["purge"], {"path": f.path, "keep": keep})
            purge = self.task(
                r,
                call,
                kind="purge",
                step={"path": f.path, "keep": tuple(keep)},
                label=f"purge {f.path}",
                notify=notify,
            )
            tasks.append({**purge, "environment": literal} if literal else purge)
        return tasks

    def reporter(self, name: str) -> dict[str, Any]:
        """The task that reports what the no_log task ``name`` did: Ansible censors its whole
        result in events (`changed` too), not what it registers. Only whether it changed is
        read, never its content."""
        var = _reported_var(name)
        self.steps[name] = replace(self.steps[name], reported_by=REPORTED.format(task=name))
        self.origins[self.steps[name].reported_by] = self.origins[name]
        return {
            "name": Unsafe(self.steps[name].reported_by),
            "ansible.builtin.debug": {"msg": "what the task before did (no_log hides it)"},
            "changed_when": f"{var} is changed",
            "ignore_errors": True,
        }

    def as_user(self, task: dict[str, Any], user: str) -> dict[str, Any]:
        """``task`` run as ``user`` with that user's runtime directory (services[].user)."""
        return {
            **task,
            "become": True,
            "become_user": Unsafe(user),
            "become_method": "su",
            "environment": {"XDG_RUNTIME_DIR": USER_RUNTIME_DIR},
            # The agent's own interpreter may sit where the user cannot read (a root-only
            # venv, found first on the agent's PATH); the module needs only the standard
            # library, so the host's python runs it.
            "vars": {USER_VAR: Unsafe(user), "ansible_python_interpreter": USER_PYTHON},
        }

    def user_service(self, r: Resource, s: Service) -> list[dict[str, Any]]:
        """A systemd user service: linger on, wait for the user's manager, then state/enable."""
        if self.family in ("alpine", "freebsd"):
            self.errors[r.id] = f"spec.services: user of {s.name}: user services need systemd"
            return []
        sk = platforms.skeletons("services")["user"]
        vars_ = {USER_VAR: Unsafe(s.user)}
        linger = fill(
            sk["linger"],
            {
                "argv": ["loginctl", "enable-linger", s.user],
                "linger": f"/var/lib/systemd/linger/{s.user}",
            },
        )
        bus = copy.deepcopy(sk["bus"])
        bus["ansible.builtin.wait_for"]["path"] = USER_RUNTIME_DIR + "/systemd/private"
        tasks = [
            # kind "service", not "command": only Ansible honours `creates`.
            self.task(r, linger, kind="service", label=f"service {s.name} user {s.user} lingers"),
            {
                **self.task(
                    r, bus, kind="service", label=f"service {s.name} user {s.user} manager"
                ),
                "vars": vars_,
            },
        ]
        if s.ensure is None and s.enable is None:
            return tasks
        state = platforms.skeletons("services")["default"]["states"][s.ensure] if s.ensure else None
        restartable = r.id in self.restartable and s.ensure == "running"
        if not restartable:
            call = fill(sk["task"], {"name": s.name, "state": state, "enable": s.enable})
            return [*tasks, self.as_user(self.task(r, call, kind="service"), s.user or "")]
        call = fill(sk["task"], {"name": s.name, "state": state})
        started = self.task(r, call, kind="service", register=_started_var(s.name))
        tasks.append(self.as_user(started, s.user or ""))
        if s.enable is not None:
            call = fill(sk["task"], {"name": s.name, "enable": s.enable})
            label = f"service {s.name} enabled"
            tasks.append(
                self.as_user(self.task(r, call, kind="service", label=label), s.user or "")
            )
        return tasks

    def service(self, r: Resource, s: Service) -> list[dict[str, Any]]:
        refused = platforms.unsupported(self.family)
        if refused:
            self.errors[r.id] = f"spec.services: {refused}"
            return []
        if s.user:
            return self.user_service(r, s)
        sk = platforms.for_family("services", self.family)
        tasks = []
        if s.arguments is not None:
            if "arguments" not in sk:
                self.errors[r.id] = (
                    f"{r.field or 'spec.services'}.arguments: arguments of {s.name} are only "
                    "supported on FreeBSD (rc.conf <name>_args)"
                )
                return []
            call = fill(
                sk["arguments"],
                {"variable": f"{s.name.replace('-', '_')}_args", "arguments": s.arguments},
            )
            notify = [_topic(f"args of {s.name}")] if s.ensure != "stopped" else None
            tasks.append(
                self.task(
                    r,
                    call,
                    kind="arguments",
                    step={"name": s.name},
                    label=f"service {s.name} arguments",
                    notify=notify,
                )
            )
        if s.ensure is not None or s.enable is not None:
            state = sk["states"][s.ensure] if s.ensure else None
            if r.id not in self.restartable or s.ensure != "running":
                tasks.append(
                    self.task(
                        r,
                        fill(sk["task"], {"name": s.name, "state": state, "enable": s.enable}),
                        kind="service",
                        step={"name": s.name, "state": state, "enabled": s.enable},
                    )
                )
                return tasks
            # Started apart from enabled, so the restart handler can tell a service this run
            # started (already on the new configuration: no restart) from one it only enabled.
            tasks.append(
                self.task(
                    r,
                    fill(sk["task"], {"name": s.name, "state": state}),
                    kind="service",
                    step={"name": s.name, "state": state},
                    register=_started_var(s.name),
                )
            )
            if s.enable is not None:
                tasks.append(
                    self.task(
                        r,
                        fill(sk["task"], {"name": s.name, "enable": s.enable}),
                        kind="service",
                        step={"name": s.name, "enabled": s.enable},
                        label=f"service {s.name} enabled",
                    )
                )
        return tasks

    def execution(self, r: Resource, e: Execution, *, handler: bool) -> dict[str, Any]:
        call = fill(platforms.skeletons("executions")["command"], {"argv": exec_argv(e.argv)})
        listen = [_topic(p) for p in e.subscribe_files] if handler else None
        task = self.task(
            r, call, kind="command", step={"argv": e.argv}, handler=handler, listen=listen
        )
        task["environment"] = {"PATH": EXEC_PATH}
        return task

    def restart(self, r: Resource, s: Service) -> dict[str, Any]:
        sk = platforms.skeletons("services")["user"] if s.user else None
        sk = sk or platforms.for_family("services", self.family)
        listen = [_topic(p) for p in s.subscribe_files]
        if s.arguments is not None:
            listen.append(_topic(f"args of {s.name}"))
        started = _started_var(s.name)
        task = self.task(
            r,
            fill(sk["restart"], {"name": s.name}),
            kind="restart",
            step={"name": s.name},
            label=f"restart service {s.name}",
            handler=True,
            listen=listen,
            when=f"not ({started} is defined and {started} is changed)",
        )
        return self.as_user(task, s.user) if s.user else task

    # -- the play ------------------------------------------------------------------------

    def build(self, node_name: str) -> list[dict[str, Any]]:
        handlers = []
        for r in self.desired.resources:
            if (
                isinstance(r.spec, Execution)
                and r.spec.subscribe_files
                and not r.spec.on_every_apply
            ):
                handlers.append(self.execution(r, r.spec, handler=True))
        for r in self.desired.resources:
            s = r.spec
            if not isinstance(s, Service):
                continue
            if (
                s.ensure != "stopped"
                and not platforms.unsupported(self.family)
                and (s.subscribe_files or s.arguments is not None)
                and (
                    s.arguments is None
                    or "arguments" in platforms.for_family("services", self.family)
                )
            ):
                handlers.append(self.restart(r, s))
        for h in handlers:
            self.listened.update(h["listen"])
        self.restartable = {self.origins[h["name"]].resource for h in handlers}

        tasks: list[dict[str, Any]] = []
        for r in self.desired.resources:
            spec = r.spec
            if isinstance(spec, Package):
                task = self.package(r, spec)
                tasks.extend([task] if task else [])
            elif isinstance(spec, File):
                tasks.extend(self.file(r, spec))
            elif isinstance(spec, Service):
                tasks.extend(self.service(r, spec))
            elif isinstance(spec, Execution) and spec.on_every_apply:
                tasks.append(self.execution(r, spec, handler=False))

        play: dict[str, Any] = {
            "name": Unsafe(f"nodemanager: {node_name}"),
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            # Restart what changed even when another resource failed.
            "force_handlers": True,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "tasks": tasks,
        }
        if handlers:
            play["handlers"] = handlers
        return [play]


def build(
    desired: DesiredState,
    family: str,
    node_name: str,
    *,
    contents: Mapping[str, Rendered] | None = None,
    show_secrets: bool = True,
) -> Plan:
    """The plan for ``desired`` on a host of platform ``family``.

    ``contents`` holds the rendered text of template files, keyed by path. With
    ``show_secrets=False`` (what ``render`` does by default) Secret-fed content is redacted.
    """
    builder = _Builder(desired, family, contents or {}, show_secrets)
    playbook = builder.build(node_name)
    play = playbook[0]
    order = [t["name"] for t in [*play["tasks"], *play.get("handlers", [])]]
    steps = tuple(builder.steps[name] for name in order if name in builder.steps)
    return Plan(playbook, dict(builder.origins), desired, family, dict(builder.errors), steps)
