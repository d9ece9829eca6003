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
import re
import time
from collections import OrderedDict
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


# The names of the data that templates may read and that a cache key must then include.
DATA_NAMES = frozenset({"node", "nodes"})
_DATA_WORD = re.compile(r"(?<![\w])(nodes?)(?![\w])")
LEX_MAX = 8 << 10  # characters: a longer template is judged by its words alone
_LEXED_MAX = 4096  # entries of (32-byte digest -> at most two names): under 1 MB in all
_lexed: OrderedDict[bytes, frozenset[str]] = OrderedDict()
# CPU seconds of lexing per window: two hundred 8 KiB templates of dense tokens (one ConfigSet
# at the API's size limit) lexed at once cost 25 s on a loaded machine. Past the budget a
# template is judged by its words (not cached), and lexed once the window has turned.
LEX_BUDGET, LEX_WINDOW = 1.0, 10.0
_lex_window = [0.0, 0.0]  # [window start, seconds spent in it] (monotonic)


def names_read(template: str) -> frozenset[str]:
    """Which of ``node`` and ``nodes`` a template may read, without parsing it.

    Jinja's parser is recursive and unbounded in time: 70 nested parentheses (or 244 nested
    ifs, a 990-term sum) raised RecursionError in the agent itself and stopped every
    reconcile, and a 1.2 MB template took seconds per pass, all outside the render child's
    limits. So this process never parses a template (the render child does, under its limits):

    - a template that does not spell the word reads nothing (no loader, no ``vars()``, and the
      sandbox refuses the underscore attributes that reach the context, so a name is only ever
      loaded by spelling it); one regular expression, linear in the text;
    - a short one (``LEX_MAX``) is lexed, which is iterative and linear: a word in the literal
      text (``nodes: 3``) or a string is not a name, and must not start a watch of every node;
    - a longer one, or one that does not lex, counts as reading each word it spells: the cost
      of a wrong guess is a re-render when that data changes, never a stale file.

    Lexed results are cached by the text's digest, at most ``_LEXED_MAX`` entries, so the cache
    stays small whatever the texts (an lru_cache keyed by whole texts held 300 MB), and lexing
    takes at most ``LEX_BUDGET`` seconds per ``LEX_WINDOW``."""
    words = frozenset(_DATA_WORD.findall(template))
    if not words or len(template) > LEX_MAX:
        return words
    key = hashlib.sha256(template.encode("utf-8", "surrogatepass")).digest()
    found = _lexed.get(key)
    if found is None:
        now = time.monotonic()
        if now - _lex_window[0] > LEX_WINDOW:
            _lex_window[:] = [now, 0.0]
        if _lex_window[1] >= LEX_BUDGET:
            return words
        found = _lexed_names(template, words)
        _lex_window[1] += time.monotonic() - now
        _lexed[key] = found
        if len(_lexed) > _LEXED_MAX:
            _lexed.popitem(last=False)
    else:
        _lexed.move_to_end(key)
    return found


def _lexed_names(template: str, words: frozenset[str]) -> frozenset[str]:
    from nodemanager.desired import jinja

    try:
        return jinja.names_lexed(_env(), template) & DATA_NAMES
    except Exception:  # does not lex: rendering reports it; until then assume the words
        return words


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
        # The files a pass that spent its budget had to render: the pass right after it
        # renders none of them (each shows what it showed last, which is what is applied),
        # so a change to anything else that arrived meanwhile applies one pass later, not two
        # (30 spinning templates held an unrelated change 40 s against 20 s per pass, issue
        # 37). By path, not key: this node's own status write changes the keys of templates
        # reading ``node``, and the same text keeps the status (and those keys) still.
        self._resting: frozenset[str] = frozenset()
        self._last: dict[str, Rendered | TemplateError] = {}  # by path, as last returned

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
        resting, self._resting = self._resting, frozenset()
        if not resting:  # a resting pass keeps the cut for the pass after it
            self._cut = None
        fresh: dict[str, Rendered | TemplateError] = {}
        retry: dict[str, Rendered | TemplateError] = {}  # returned, not cached
        for i in [i for i in missing if files[i].path in resting]:
            path = files[i].path
            retry[keys[i]] = self._last.get(path) or TemplateError(path, _RESTING)
        todo = [i for i in missing if files[i].path not in resting]
        spent = False
        if todo:
            _env()  # Jinja2 loaded here, once: the forked render child inherits it
            jobs = [_job(files[i], data) for i in todo]
            for i, out in zip(todo, run_limited(jobs, self.limits), strict=True):
                f = files[i]
                if isinstance(out, BudgetSpent):  # not its own fault: tried again next time
                    retry[keys[i]] = TemplateError(f.path, str(out))
                    self._cut = self._cut or keys[i]
                    spent = True
                elif isinstance(out, JobFailed):
                    fresh[keys[i]] = TemplateError(f.path, str(out))
                else:
                    fresh[keys[i]] = Rendered(out, secret=bool(f.secret_refs))
        if spent and not resting:
            self._resting = frozenset(files[i].path for i in todo)
        kept = [k for k in keys if k not in retry]
        self._cache = {k: fresh[k] if k in fresh else self._cache[k] for k in kept}
        results = [self._cache[k] if k in self._cache else retry[k] for k in keys]
        self._last = {f.path: r for f, r in zip(files, results, strict=True)}
        return results


_RESTING = "not rendered: the last pass spent its render budget; tried again next pass"


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
