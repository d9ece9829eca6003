"""ConfigSet: the desired state of packages, files, services and executions for matching nodes.

Field names follow the established nodemanager API (``subscribe_files`` keeps its underscore);
the dataclasses use Python names. ``ConfigSet.from_dict`` is the only way in: it validates the
same rules the CRD schema enforces, so objects read from files (``-f``) get the same errors as
objects written to the API server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api.errors import FieldError, InvalidObject
from nodemanager.api.labels import LabelSelector, selector
from nodemanager.api.maxunavailable import problem
from nodemanager.api.reader import Reader

API_VERSION = "common.nodemanager/v1"
KIND = "ConfigSet"
DEFAULT_WEIGHT = 100

PACKAGE_ENSURE = ("installed", "absent", "latest")
FILE_ENSURE = ("file", "directory", "symlink", "absent")
SERVICE_ENSURE = ("running", "stopped")
MODE = re.compile(r"^0?[0-7]{3,4}$")
# Names handed to package managers and service managers: no whitespace, no option-looking words.
SIMPLE_NAME = re.compile(r"^[A-Za-z0-9_.+@:][A-Za-z0-9_.+@:/-]*$")
# Upstream's templates are gomplate (Go templates): `(ds "data")`, `{{ range }}`, `{{ end }}`,
# `{{ .Name }}`, `{{ $x := }}`. None of these is valid Jinja2, so a match is never a false alarm
# on a working template; it turns a confusing Jinja syntax error into a pointer to the guide.
GOMPLATE = re.compile(
    r"\(\s*(?:ds|datasource)\s+\""
    r"|\{\{-?\s*(?:(?:range|end|if|else|with|define|block)\b|\.[A-Za-z]|\$[A-Za-z_]*\s*:?=)"
)
MIGRATION_GUIDE = "docs/migrating-templates.md"


@dataclass(frozen=True)
class Package:
    name: str
    ensure: str = "installed"
    version: str | None = None


@dataclass(frozen=True)
class Ref:
    """A Secret or ConfigMap reference; without ``key`` every key of the object is meant."""

    name: str
    key: str | None = None


@dataclass(frozen=True)
class File:
    path: str
    ensure: str = "file"
    content: str | None = None
    template: str | None = None
    owner: str | None = None
    group: str | None = None
    mode: str | None = None
    target: str | None = None
    secret_refs: tuple[Ref, ...] = ()
    configmap_refs: tuple[Ref, ...] = ()
    create_only: bool = False
    purge: bool = False

    @property
    def uses_secrets(self) -> bool:
        return bool(self.secret_refs)


@dataclass(frozen=True)
class Service:
    name: str
    ensure: str | None = None
    enable: bool | None = False  # as upstream: omitted means disabled at boot
    subscribe_files: tuple[str, ...] = ()
    arguments: str | None = None
    user: str | None = None
    lock_group: str | None = None


@dataclass(frozen=True)
class Execution:
    command: str
    args: tuple[str, ...] = ()
    subscribe_files: tuple[str, ...] = ()
    # Addition (opt-in): also run on every apply and drift check. Without it and without
    # subscribe_files an execution never runs, as upstream's handleExecutions.
    on_every_apply: bool = False

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.command, *self.args)


@dataclass(frozen=True)
class Notify:
    api_version: str
    kind: str
    name: str | None = None  # None: every object of the kind in the namespace, as upstream
    namespace: str | None = None


@dataclass(frozen=True)
class ConfigSet:
    name: str
    namespace: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    generation: int = 0
    resource_version: str = ""
    selector: LabelSelector | None = None
    weight: int = DEFAULT_WEIGHT
    packages: tuple[Package, ...] = ()
    files: tuple[File, ...] = ()
    services: tuple[Service, ...] = ()
    executions: tuple[Execution, ...] = ()
    notifies: tuple[Notify, ...] = field(default=())

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, strict: bool = False) -> ConfigSet:
        """Parse one ConfigSet object; raise InvalidObject naming every bad field.

        ``strict`` (local files) also refuses what kubectl refuses before the API server would
        prune or reject it: an unknown field, a missing or wrong apiVersion or kind. Objects
        read from the API server are parsed leniently: it has already validated them, and a
        newer CRD may carry fields this agent does not know yet."""
        errors: list[FieldError] = []
        root = Reader(raw, "", errors)
        root.allow("apiVersion", "status")
        meta = root.child("metadata")
        meta.allow_any()
        if strict:
            api_version = root.string("apiVersion", required=True)
            if api_version and api_version != API_VERSION:
                errors.append(
                    FieldError("apiVersion", f"must be {API_VERSION}, not {api_version!r}")
                )
        name = meta.string("name", required=True) or ""
        kind = root.string("kind", required=strict)
        if kind not in (None, KIND):
            errors.append(FieldError("kind", f"must be {KIND}, not {kind!r}"))
        spec = root.child("spec")
        # The controller's fields (staged rollouts): valid in a file read in local mode too, so
        # an object exported from the cluster renders and applies as it is.
        spec.allow("rollout", "paused")
        raw_spec = raw.get("spec")
        rollout = raw_spec.get("rollout") if isinstance(raw_spec, Mapping) else None
        if isinstance(rollout, Mapping) and (why := problem(rollout.get("maxUnavailable", 1))):
            errors.append(FieldError("spec.rollout.maxUnavailable", why))
        configset = cls(
            name=name,
            namespace=meta.string("namespace") or "",
            labels=tuple(sorted(meta.string_map("labels").items())),
            generation=meta.integer("generation") or 0,
            resource_version=meta.string("resourceVersion") or "",
            selector=selector(spec.child("selector")) if spec.has("selector") else None,
            weight=_weight(spec),
            packages=tuple(_package(r) for r in spec.items("packages")),
            files=tuple(_file(r) for r in spec.items("files")),
            services=tuple(_service(r) for r in spec.items("services")),
            executions=tuple(_execution(r) for r in spec.items("executions")),
            notifies=tuple(_notify(r) for r in spec.items("notifies")),
        )
        if strict:
            errors.extend(FieldError(path, "unknown field") for path in root.unknown_fields())
        if errors:
            raise InvalidObject(KIND, name, errors)
        return configset


def _weight(spec: Reader) -> int:
    weight = spec.integer("weight")
    if weight is None:
        return DEFAULT_WEIGHT
    if weight < 0:
        spec.error("weight", "must be 0 or more")
    return weight


def _package(r: Reader) -> Package:
    return Package(
        name=r.string("name", required=True, pattern=SIMPLE_NAME) or "",
        ensure=r.choice("ensure", PACKAGE_ENSURE, default="installed") or "installed",
        version=r.string("version", pattern=SIMPLE_NAME),
    )


def _refs(r: Reader, name: str) -> tuple[Ref, ...]:
    """Upstream's form is a list of names (``secretRefs: [db]``); ``{name, key}`` picks one key.
    Both mean the same object, so both forms may be mixed in one list."""
    refs = []
    for i, item in enumerate(r.raw_list(name)):
        if isinstance(item, str):
            if not item.strip():
                r.error(f"{name}[{i}]", "must not be empty")
            refs.append(Ref(name=item))
        else:
            ref = r.sub(item, f"{r.field(name)}[{i}]")
            refs.append(Ref(name=ref.string("name", required=True) or "", key=ref.string("key")))
    return tuple(refs)


def _file(r: Reader) -> File:
    f = File(
        path=r.path("path", required=True) or "",
        ensure=r.choice("ensure", FILE_ENSURE, default="file") or "file",
        content=r.string("content", strip=False),
        template=r.string("template", strip=False),
        owner=r.string("owner", pattern=SIMPLE_NAME),
        group=r.string("group", pattern=SIMPLE_NAME),
        mode=_mode(r),
        target=r.string("target"),
        secret_refs=_refs(r, "secretRefs"),
        configmap_refs=_refs(r, "configMapRefs"),
        create_only=r.boolean("createOnly", default=False),
        purge=r.boolean("purge", default=False),
    )
    if f.content is not None and f.template is not None:
        r.error("template", "content and template are mutually exclusive")
    if f.template is not None and GOMPLATE.search(f.template):
        r.error(
            "template",
            "looks like a gomplate template (upstream nodemanager's syntax); nodemanager renders "
            f"Jinja2: see {MIGRATION_GUIDE} for the translation",
        )
    if f.ensure == "symlink" and not f.target:
        r.error("target", "required when ensure is symlink")
    if f.ensure != "file" and (f.content is not None or f.template is not None):
        r.error(
            "content" if f.content is not None else "template",
            f"not allowed when ensure is {f.ensure}",
        )
    if f.purge and f.ensure != "directory":
        r.error("purge", "only allowed when ensure is directory")
    return f


def _mode(r: Reader) -> str | None:
    # An unquoted YAML 644 is a decimal number, not a mode: require the string, as the CRD does.
    mode = r.string("mode", pattern=MODE, hint='an octal string such as "0644"', numbers=False)
    # One spelling per mode, four digits, so "644" and "0644", "1777" and "01777" are one
    # declaration when merging.
    return f"{int(mode, 8):04o}" if mode and MODE.match(mode) else mode


def _service(r: Reader) -> Service:
    return Service(
        name=r.string("name", required=True, pattern=SIMPLE_NAME) or "",
        ensure=r.choice("ensure", SERVICE_ENSURE, default=None),
        # Upstream's rule: "whether the service should be enabled at boot"; omitted is false.
        enable=r.boolean("enable", default=False),
        subscribe_files=r.paths("subscribe_files"),
        arguments=r.string("arguments", strip=False),
        user=r.string("user", pattern=SIMPLE_NAME),
        lock_group=r.string("lock_group"),
    )


def _execution(r: Reader) -> Execution:
    return Execution(
        command=r.string("command", required=True) or "",
        args=r.strings("args"),
        subscribe_files=r.paths("subscribe_files"),
        on_every_apply=r.boolean("onEveryApply", default=False),
    )


def _notify(r: Reader) -> Notify:
    return Notify(
        api_version=r.string("apiVersion", required=True) or "",
        kind=r.string("kind", required=True) or "",
        name=r.string("name") or None,
        namespace=r.string("namespace"),
    )
