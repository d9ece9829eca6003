"""Render ``files[].template`` with node data: sandboxed Jinja2, undefined names are errors.

Data: ``node.name``, ``node.labels``, ``node.status``, ``node.configmaps`` (the file's
``configMapRefs`` merged, later refs win), ``node.secrets`` (``secretRefs`` merged, decoded to
text; binary values through the ``b64decode``/``b64encode`` filters on the raw value) and
``nodes`` (every ManagedNode: name, labels, status; sorted by name). A template that fails is
reported for its file with the field path; that file is left out (untouched on disk) and
everything else still applies.

Templates render in a child process under limits (``sandbox.py``): a template that spins or
eats memory is a TemplateError on its own file. Results are cached by a digest of everything a
template can read, so an unchanged template costs no child process at all.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from nodemanager.api import File, Node, Ref
from nodemanager.desired.merge import DesiredState, Resource
from nodemanager.desired.redact import scrub
from nodemanager.desired.sandbox import BudgetSpent, JobFailed, Limits, run_limited

if TYPE_CHECKING:  # Jinja2 itself only when a template renders (desired/jinja.py)
    from jinja2.sandbox import SandboxedEnvironment


@dataclass(frozen=True)
class TemplateData:
    """What templates may read: this node, every node, and the namespace's Secrets/ConfigMaps."""

    node: Node
    nodes: tuple[Node, ...] = ()
    secrets: Mapping[str, Mapping[str, str]] = field(
        default_factory=dict
    )  # name -> key -> base64 (as the API gives it)
    configmaps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> key -> text


@dataclass(frozen=True)
class Rendered:
    text: str
    secret: bool


class TemplateError(Exception):
    def __init__(self, path: str, message: str):
        self.path = path
        super().__init__(message)


class Binary:
    """A Secret value that is not UTF-8 text. Printing it is an error: it reaches a file only
    through an explicit filter (``b64encode``, ``hex``)."""

    def __init__(self, data: bytes):
        self.data = data

    def __str__(self) -> str:
        raise ValueError("binary Secret value: write it through a filter (b64encode, hex)")


def _bytes(value: str | bytes | Binary) -> bytes:
    if isinstance(value, Binary):
        return value.data
    return value.encode() if isinstance(value, str) else value


def _b64decode(value: str) -> str:
    return base64.b64decode(value).decode("utf-8")


def _b64encode(value: str | bytes | Binary) -> str:
    return base64.b64encode(_bytes(value)).decode()


def _hex(value: str | bytes | Binary) -> str:
    return _bytes(value).hex()


@functools.cache
def _env() -> SandboxedEnvironment:
    from nodemanager.desired import jinja

    return jinja.environment({"b64decode": _b64decode, "b64encode": _b64encode, "hex": _hex})


def _merge_refs(
    refs: tuple[Ref, ...], source: Mapping[str, Mapping[str, str]], kind: str, decode: bool
) -> dict[str, str | Binary]:
    merged: dict[str, str | Binary] = {}
    for ref in refs:
        data = source.get(ref.name)
        if data is None:
            raise KeyError(f"{kind} {ref.name!r} not found")
        keys = [ref.key] if ref.key else sorted(data)
        for key in keys:
            if key not in data:
                raise KeyError(f"{kind} {ref.name!r} has no key {key!r}")
            value = data[key]
            if decode:
                try:
                    raw = base64.b64decode(value)
                except binascii.Error:
                    raise KeyError(f"{kind} {ref.name!r} key {key!r} is not valid base64") from None
                try:
                    merged[key] = raw.decode("utf-8")
                except UnicodeDecodeError:
                    merged[key] = Binary(raw)
            else:
                merged[key] = value
    return merged


def _node_view(node: Node) -> dict[str, Any]:
    return {"name": node.name, "labels": dict(node.labels), "status": dict(node.status)}


def render_file(f: File, data: TemplateData) -> Rendered:
    """Render one file's template; raise TemplateError with a message fit for status."""
    try:
        secrets = _merge_refs(f.secret_refs, data.secrets, "Secret", decode=True)
        configmaps = _merge_refs(f.configmap_refs, data.configmaps, "ConfigMap", decode=False)
    except KeyError as e:
        raise TemplateError(f.path, str(e.args[0])) from None
    node = {**_node_view(data.node), "secrets": secrets, "configmaps": configmaps}
    nodes = [_node_view(n) for n in sorted(data.nodes, key=lambda n: n.name)]
    from nodemanager.desired import jinja

    try:
        text = jinja.render(_env(), f.template or "", node=node, nodes=nodes)
    except MemoryError:
        message = "template over the memory limit"
    except Exception as e:  # filters on bad input (b64decode of text), arithmetic on strings...
        message = jinja.error_message(e) or f"template failed: {type(e).__name__}: {e}"
    else:
        return Rendered(text, secret=bool(f.secret_refs))
    # Messages go to status and Events: never with a Secret value in them.
    raise TemplateError(f.path, scrub(message, secrets.values()))


def unreadable(template: str) -> list[tuple[int, str]]:
    """(line, why) for each reason ``template`` fails to render on any node: syntax, or a name
    other than the data (``node``, ``nodes``); empty when it may render."""
    from nodemanager.desired import jinja

    return jinja.unreadable(_env(), template, frozenset({"node", "nodes"}))


@functools.lru_cache(maxsize=1024)
def names_read(template: str) -> frozenset[str]:
    """The names a template loads (``node``, ``nodes``), from its parsed AST; a template that
    does not parse reads nothing (rendering reports its syntax error).

    Only parsed, never compiled: jinja2.meta's introspection generates code, which folds
    constants in this process. A name the template also sets itself counts as read, which can
    only mean rendering again when it did not need to."""
    from nodemanager.desired import jinja

    return jinja.names_loaded(_env(), template)


def _digest(value: object) -> str:
    raw = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


class Renderer:
    """Renders template files under limits, each file once per distinct input.

    The cache keeps only the entries the last call used, so it never grows past the files
    declared now. Failures are cached too: a template over its CPU limit is not tried again
    until its text or its data changed.
    """

    def __init__(self, limits: Limits = Limits()):
        self.limits = limits
        self._cache: dict[str, Rendered | TemplateError] = {}
        # The file the last pass's budget ran out on: it goes last in the next pass, so one
        # template slower than a whole pass (a loaded machine) cannot hold back every other.
        self._cut: str | None = None

    def _key(self, f: File, data: TemplateData, node: str, nodes: str) -> str:
        refs = [
            [r.name, r.key, dict(source.get(r.name) or {})]
            for refs, source in ((f.secret_refs, data.secrets), (f.configmap_refs, data.configmaps))
            for r in refs
        ]
        # Node data counts only for a template that reads it: a peer's churn, or this node's
        # own status write, must not re-render (and re-run the limits of) the others.
        names = names_read(f.template or "")
        me = node if "node" in names else ""
        peers = nodes if "nodes" in names else ""
        return _digest(
            [f.path, f.template, [list(f.secret_refs), list(f.configmap_refs)], refs, me, peers]
        )

    def render(self, files: list[File], data: TemplateData) -> list[Rendered | TemplateError]:
        node = _digest(_node_view(data.node))
        nodes = _digest([_node_view(n) for n in sorted(data.nodes, key=lambda n: n.name)])
        keys = [self._key(f, data, node, nodes) for f in files]
        missing = [i for i, k in enumerate(keys) if k not in self._cache]
        missing.sort(key=lambda i: keys[i] == self._cut)  # stable: the rest keep their order
        self._cut = None
        fresh: dict[str, Rendered | TemplateError] = {}
        retry: dict[str, TemplateError] = {}
        if missing:
            _env()  # Jinja2 loaded here, once: the forked render child inherits it
            jobs = [_job(files[i], data) for i in missing]
            for i, out in zip(missing, run_limited(jobs, self.limits), strict=True):
                f = files[i]
                if isinstance(out, BudgetSpent):  # not its own fault: tried again next time
                    retry[keys[i]] = TemplateError(f.path, str(out))
                    self._cut = self._cut or keys[i]
                elif isinstance(out, JobFailed):
                    fresh[keys[i]] = TemplateError(f.path, str(out))
                else:
                    fresh[keys[i]] = Rendered(out, secret=bool(f.secret_refs))
        kept = [k for k in keys if k not in retry]
        self._cache = {k: fresh[k] if k in fresh else self._cache[k] for k in kept}
        return [self._cache[k] if k in self._cache else retry[k] for k in keys]


def _job(f: File, data: TemplateData) -> Callable[[], str]:
    return lambda: render_file(f, data).text


_RENDERER = Renderer()


def _round_robin(resources: list[Resource]) -> list[Resource]:
    """One file of each ConfigSet in turn: thirty slow templates of one ConfigSet spend the
    render budget after the other ConfigSets' files, not before them."""
    by_configset: dict[str, list[Resource]] = {}
    for r in resources:
        by_configset.setdefault(r.configsets[0] if r.configsets else "", []).append(r)
    queues = list(by_configset.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def render_templates(
    desired: DesiredState, data: TemplateData, renderer: Renderer | None = None
) -> tuple[DesiredState, dict[str, Rendered], dict[str, str]]:
    """Render every template file. Returns the desired state without failed files, the rendered
    contents by path, and the failures by resource id, each naming its field path."""
    contents: dict[str, Rendered] = {}
    failures: dict[str, str] = {}
    templated = [
        r
        for r in desired.of_kind("file")
        if isinstance(r.spec, File) and r.spec.template is not None
    ]
    templated = _round_robin(templated)
    specs = [r.spec for r in templated if isinstance(r.spec, File)]
    outcomes = (renderer or _RENDERER).render(specs, data)
    for r, out in zip(templated, outcomes, strict=True):
        if isinstance(out, Rendered):
            contents[r.key] = out
        else:
            failures[r.id] = f"TemplateError: {r.field}.template: {out}"
    if not failures:
        return desired, contents, failures
    kept = tuple(r for r in desired.resources if r.id not in failures)
    return replace(desired, resources=kept), contents, failures
