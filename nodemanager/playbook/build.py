"""Build the plan for one node: a typed step per task and handler, in play order.

Files notify the handlers of the services and executions that subscribe to them; handlers run
executions first (a ``daemon-reload`` belongs before restarts), then service restarts. The steps
are the whole plan: render.py makes the Ansible tasks from them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodemanager.api import Execution, File, Package, Service
from nodemanager.desired.merge import DesiredState, Resource
from nodemanager.desired.templates import Rendered
from nodemanager.playbook import platforms, render
from nodemanager.playbook.literal import NotLiteral, literal_env
from nodemanager.playbook.plan import Plan
from nodemanager.playbook.render import LINGER, MANAGER, REPORTED
from nodemanager.playbook.steps import Origin, Step, StepKind

__all__ = ["FILE_FORMS", "Plan", "build"]

# The step kind of each file skeleton in playbook_templates/files.yaml.
FILE_FORMS: dict[str, StepKind] = {form: kind for kind, form in render.FILE_FORMS.items()}


_TOPIC = "nodemanager changed "


def _topic(path: str) -> str:
    return _TOPIC + path


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
        self.errors: dict[str, str] = {}
        self.listened: set[str] = set()
        self.restartable: set[str] = set()  # resources with a restart handler

    def step(
        self,
        resource: Resource,
        kind: StepKind,
        *,
        label: str | None = None,
        module: str | None = None,
        secret: bool = False,
        handler: bool = False,
        **values: Any,
    ) -> Step:
        """The step of one task or handler of ``resource``; its module is its skeleton's unless
        given."""
        name = self.name(resource, label)
        origin = Origin(
            resource.id, resource.configsets, field=resource.field, handler=handler, secret=secret
        )
        module = module or render.module(kind, self.family, bool(values.get("user")))
        return Step(kind, name, origin, module, **values)

    def name(self, r: Resource, label: str | None = None) -> str:
        """The task's name: ``ConfigSet <name> | <kind> <key>`` unless labelled (``ConfigSets
        <a> + <b>`` when several declare it): it starts with a capital, as Ansible's own
        convention (ansible-lint's name[casing]) wants, and ConfigSet names are lower case."""
        word = "ConfigSets" if len(r.configsets) > 1 else "ConfigSet"
        return f"{word} {' + '.join(r.configsets)} | {label or r.kind + ' ' + r.key}"

    # -- resources -----------------------------------------------------------------------

    def package(self, r: Resource, p: Package) -> list[Step]:
        refused = platforms.unsupported(self.family)
        if refused:
            self.errors[r.id] = f"spec.packages: {refused}"
            return []
        sk = platforms.for_family("packages", self.family)
        name = sk["version"].format(name=p.name, version=p.version) if p.version else p.name
        return [self.step(r, "package", name=name, state=sk["states"][p.ensure])]

    def file(self, r: Resource, f: File) -> list[Step]:
        # Only a purge looks at the other files: every file scanning all of them was quadratic
        # (a third of planning 2,000 resources).
        below = f.path.rstrip("/") + "/"
        keep = (
            sorted(o.key for o in self.desired.of_kind("file") if o.key.startswith(below))
            if f.purge
            else []
        )
        try:  # `$HOME` and `~` mean themselves: the modules' environment keeps them so
            literal = literal_env([f.path, *([f.target] if f.target else []), *keep])
        except NotLiteral as e:
            self.errors[r.id] = f"{r.field or 'spec.files'}: {e}"
            return []
        notify = (_topic(f.path),) if _topic(f.path) in self.listened else ()
        literal_items = tuple(literal.items())
        common: dict[str, Any] = {"path": f.path, "notify": notify, "literal": literal_items}
        secret = f.uses_secrets or bool(self.contents.get(f.path) and self.contents[f.path].secret)
        values: dict[str, Any] = {
            "owner": f.owner or None,
            "group": f.group or None,
            "target": f.target or None,
            # Content fed by a Secret is private unless the ConfigSet says otherwise.
            "mode": f.mode or ("0600" if secret else None),
            "create_only": f.create_only,
        }
        kind = FILE_FORMS[f.ensure]
        text = None
        if f.ensure == "file":
            text = f.content if f.template is None else self.contents[f.path].text
        if text:
            kind = "write"
            values["content"] = None if secret and not self.show_secrets else text
            # Upstream chowns every file it writes, to root:root (root:wheel on FreeBSD) when
            # the ConfigSet names no owner, and a changed owner runs the file's subscribers.
            values["owner"] = f.owner or "root"
            values["group"] = f.group or ("wheel" if self.family == "freebsd" else "root")
        elif f.ensure == "file" and not f.create_only:
            # Upstream writes no empty file (no content, "", or a template rendering nothing):
            # none is created or emptied. createOnly asks for one, made empty when missing.
            return []
        if secret:  # the task after it reports whether it changed (Ansible censors no_log)
            values["reported_by"] = REPORTED.format(task=self.name(r))
        steps = [self.step(r, kind, secret=secret, **common, **values)]
        if f.purge:
            # Upstream counts each purged entry as changed, never the directory: a purge does
            # not notify the directory's subscribers, and an entry a subscription names (not
            # declared, so purged) is purged by a task of its own that notifies it.
            for entry in self._subscribed_entries(below, keep):
                label = f"purge {f.path} entry {entry}"
                only = {**common, "notify": (_topic(entry),), "only": (entry,)}
                steps.append(self.step(r, "purge", label=label, keep=tuple(keep), **only))
            label = f"purge {f.path}"
            purge = {**common, "notify": ()}
            steps.append(self.step(r, "purge", label=label, keep=tuple(keep), **purge))
        return steps

    def _subscribed_entries(self, below: str, keep: list[str]) -> list[str]:
        """Paths directly below a purged directory that a subscription names and no file
        declares: a purge would remove them, and upstream then runs their subscribers."""
        entries = (t[len(_TOPIC) :] for t in self.listened if t.startswith(_TOPIC + below))
        return sorted(
            e for e in entries if e[len(below) :] and "/" not in e[len(below) :] and e not in keep
        )

    def user_service(self, r: Resource, s: Service) -> list[Step]:
        """A systemd user service: linger on, wait for the user's manager, then state/enable."""
        if self.family in ("alpine", "freebsd"):
            self.errors[r.id] = f"spec.services: user of {s.name}: user services need systemd"
            return []
        who: dict[str, Any] = {"name": s.name, "user": s.user}
        steps = [
            # kind "service", not "command": only Ansible honours `creates`.
            self.step(
                r, "service", module=LINGER, label=f"service {s.name} user {s.user} lingers", **who
            ),
            self.step(
                r, "service", module=MANAGER, label=f"service {s.name} user {s.user} manager", **who
            ),
        ]
        if s.ensure is None and s.enable is None:
            return steps
        return [*steps, *self.state(r, s, platforms.skeletons("services")["default"])]

    def state(self, r: Resource, s: Service, sk: Mapping[str, Any]) -> list[Step]:
        """A service's run state and enablement: started apart from enabled when it has a
        restart handler, so the handler can tell a service this run started (already on the
        new configuration: no restart) from one it only enabled."""
        state = sk["states"][s.ensure] if s.ensure else None
        who: dict[str, Any] = {"name": s.name, "user": s.user}
        if r.id not in self.restartable or s.ensure != "running":
            return [self.step(r, "service", state=state, enabled=s.enable, **who)]
        steps = [self.step(r, "service", state=state, registers_start=True, **who)]
        if s.enable is not None:
            label = f"service {s.name} enabled"
            steps.append(self.step(r, "service", label=label, enabled=s.enable, **who))
        return steps

    def service(self, r: Resource, s: Service) -> list[Step]:
        refused = platforms.unsupported(self.family)
        if refused:
            self.errors[r.id] = f"spec.services: {refused}"
            return []
        if s.user:
            return self.user_service(r, s)
        sk = platforms.for_family("services", self.family)
        steps = []
        if s.arguments is not None:
            if "arguments" not in sk:
                self.errors[r.id] = (
                    f"{r.field or 'spec.services'}.arguments: arguments of {s.name} are only "
                    "supported on FreeBSD (rc.conf <name>_args)"
                )
                return []
            notify = (_topic(f"args of {s.name}"),) if s.ensure != "stopped" else ()
            label = f"service {s.name} arguments"
            steps.append(
                self.step(
                    r, "arguments", label=label, name=s.name, arguments=s.arguments, notify=notify
                )
            )
        if s.ensure is not None or s.enable is not None:
            steps += self.state(r, s, sk)
        return steps

    def execution(self, r: Resource, e: Execution, *, handler: bool) -> Step:
        listen = tuple(_topic(p) for p in e.subscribe_files) if handler else ()
        return self.step(r, "command", argv=tuple(e.argv), handler=handler, listen=listen)

    def restart(self, r: Resource, s: Service) -> Step:
        listen = [_topic(p) for p in s.subscribe_files]
        if s.arguments is not None:
            listen.append(_topic(f"args of {s.name}"))
        return self.step(
            r,
            "restart",
            label=f"restart service {s.name}",
            handler=True,
            listen=tuple(listen),
            name=s.name,
            user=s.user,
            conditional=True,  # not after this run started it
        )

    # -- the play ------------------------------------------------------------------------

    def handlers(self) -> list[Step]:
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
        return handlers

    def build(self) -> list[Step]:
        handlers = self.handlers()
        for h in handlers:
            self.listened.update(h.listen)
        self.restartable = {h.origin.resource for h in handlers}
        tasks: list[Step] = []
        for r in self.desired.resources:
            spec = r.spec
            if isinstance(spec, Package):
                tasks += self.package(r, spec)
            elif isinstance(spec, File):
                tasks += self.file(r, spec)
            elif isinstance(spec, Service):
                tasks += self.service(r, spec)
            elif isinstance(spec, Execution) and spec.on_every_apply:
                tasks.append(self.execution(r, spec, handler=False))
        return [*tasks, *handlers]


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
    steps = tuple(builder.build())
    return Plan(steps, desired, family, node_name, dict(builder.errors))
