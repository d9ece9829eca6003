"""The one pipeline from a Snapshot to a plan: parse, select, merge, render templates, build.

``render``, ``apply`` and the agent all go through ``Planner.plan`` (``plan_node`` for a single
use), so what ``render`` prints is what the agent would run. The Planner keeps two caches so an
idle reconcile costs the same at 50 or 2,000 resources:

- each ConfigSet is parsed once per (uid, name, resourceVersion);
- the plan is rebuilt only when its inputs changed: the ConfigSets' versions and this node's
  labels, plus, only when a selected ConfigSet has a template, what templates read (this node's
  status, every node, Secrets, ConfigMaps).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from nodemanager.agent.identity import NodeIdentity
from nodemanager.agent.sources import Snapshot
from nodemanager.api import ConfigSet, InvalidObject, Node
from nodemanager.api.errors import FieldError
from nodemanager.desired.merge import DesiredState, merge
from nodemanager.desired.select import matches, select
from nodemanager.desired.templates import Rendered, TemplateData, names_read, render_templates
from nodemanager.playbook.build import Plan, build


@dataclass(frozen=True)
class Invalid:
    """A ConfigSet that does not parse: reported, never applied."""

    name: str
    resource_version: str
    generation: int
    error: str  # every field error, each with its path
    message: str  # the whole sentence: "ConfigSet x is invalid: spec.files[0].mode: ..."
    origin: str  # "<file> (document n)" in local mode
    selector: ConfigSet | None  # its selector alone, when that much parses

    def targets(self, labels: Mapping[str, str]) -> bool:
        """Whether it targets this node; with an unreadable selector, assume so (report it)."""
        return self.selector is None or matches(self.selector, labels)


@dataclass(frozen=True)
class NodePlan:
    node: Node  # this node as selection and templates see it
    desired: DesiredState  # selected and merged, before templates: every resource to report
    plan: Plan
    contents: Mapping[str, Rendered]  # rendered template files by path
    errors: Mapping[str, str]  # resource id -> why it is not in the plan (template, platform)
    invalid: tuple[Invalid, ...]  # every ConfigSet that did not parse
    digests: Mapping[str, str]  # resource id -> digest of its planned tasks
    key: Hashable  # what the plan was computed from (None: not cacheable)


def _invalid(raw: Any, error: InvalidObject, origin: str) -> Invalid:
    raw = raw if isinstance(raw, Mapping) else {}
    meta = raw.get("metadata") or {}
    try:
        spec = raw.get("spec") or {}
        selector: ConfigSet | None = ConfigSet.from_dict(
            {"metadata": meta, "spec": {k: v for k, v in spec.items() if k == "selector"}}
        )
    except (InvalidObject, AttributeError):
        selector = None
    return Invalid(
        error.name,
        str(meta.get("resourceVersion", "")),
        int(meta.get("generation") or 0),
        "; ".join(str(x) for x in error.errors),
        str(error),
        origin,
        selector,
    )


def _unreadable(raw: Any, e: Exception) -> InvalidObject:
    """An unexpected failure to read one ConfigSet, as its own InvalidSpec: one author's text
    must never stop the reconcile of every other ConfigSet."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
    return InvalidObject(
        "ConfigSet", name, [FieldError("spec", f"cannot be read ({type(e).__name__})")]
    )


def _cache_key(raw: Any) -> tuple[str, str, str] | None:
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict) or not meta.get("resourceVersion"):
        return None  # files have no version: parse them every time (once per command)
    return str(meta.get("uid", "")), str(meta.get("name", "")), str(meta["resourceVersion"])


class Planner:
    def __init__(self, identity: NodeIdentity, *, show_secrets: bool = True):
        self.identity, self.show_secrets = identity, show_secrets
        self._parsed: dict[tuple[str, str, str], ConfigSet | Invalid] = {}
        self._keys: tuple[tuple[str, str, str] | None, ...] = ()  # of the last parse
        # Parsed ConfigSets with a template file, by id() (held here, so no id is reused).
        self._templated: dict[int, ConfigSet] = {}
        self._last: NodePlan | None = None
        self.builds = 0  # how many plans were built (tests and bench read it)

    def labels(self, snap: Snapshot) -> dict[str, str]:
        """The node's labels: those on its ManagedNode, with the ones the agent manages on top."""
        own = (snap.node.get("metadata") or {}).get("labels") or {}
        return {**own, **self.identity.labels}

    def parse(self, snap: Snapshot) -> tuple[list[ConfigSet], list[Invalid]]:
        """Every ConfigSet of ``snap`` parsed, each at most once per resourceVersion."""
        parsed: dict[tuple[str, str, str], ConfigSet | Invalid] = {}
        good: list[ConfigSet] = []
        bad: list[Invalid] = []
        keys = tuple(_cache_key(raw) for raw in snap.configsets)
        for i, (raw, key) in enumerate(zip(snap.configsets, keys, strict=True)):
            item = self._parsed.get(key) if key else None
            if item is None:
                try:
                    item = ConfigSet.from_dict(raw, strict=snap.strict)
                    if any(f.template is not None for f in item.files):
                        self._templated[id(item)] = item
                except InvalidObject as e:
                    item = _invalid(raw, e, snap.origin(i))
                except Exception as e:  # RecursionError, or a bug: this ConfigSet, not the node
                    item = _invalid(raw, _unreadable(raw, e), snap.origin(i))
            if key:
                parsed[key] = item
            if isinstance(item, ConfigSet):
                good.append(item)
            else:
                bad.append(item)
        live = {id(item) for item in good}
        self._parsed, self._keys = parsed, keys  # deleted or replaced versions drop out
        self._templated = {i: cs for i, cs in self._templated.items() if i in live}
        return good, bad

    def _key(self, snap: Snapshot, labels: Mapping[str, str], selected: list[ConfigSet]) -> Any:
        """What the plan depends on; ``parse(snap)`` has just run."""
        if None in self._keys:
            return None
        key: tuple[Any, ...] = (self._keys, tuple(sorted(labels.items())))
        if any(id(cs) in self._templated for cs in selected):
            read = [snap.node.get("status"), snap.nodes, snap.secrets, snap.configmaps]
            key += (json.dumps(read, sort_keys=True, default=str),)
        return key

    def plan(self, snap: Snapshot) -> NodePlan:
        """The plan for this node from ``snap``; the last one again when its inputs are equal."""
        labels = self.labels(snap)
        configsets, invalid = self.parse(snap)
        selected = select(configsets, labels)
        key = self._key(snap, labels, selected)
        if key is not None and self._last is not None and self._last.key == key:
            return self._last
        me = Node(self.identity.name, labels, (snap.node or {}).get("status") or {})
        others = tuple(Node.from_dict(n) for n in snap.nodes)
        merged = merge(selected)
        desired, contents, failures = render_templates(
            merged, TemplateData(me, others, snap.secrets, snap.configmaps)
        )
        plan = build(
            desired,
            self.identity.family,
            self.identity.name,
            contents=contents,
            show_secrets=self.show_secrets,
        )
        self.builds += 1
        self._last = NodePlan(
            me,
            merged,
            plan,
            contents,
            {**failures, **plan.errors},
            tuple(invalid),
            plan.resource_digests(),
            key,
        )
        return self._last

    def uses_nodes(self, snap: Snapshot) -> bool:
        """Whether a template of a ConfigSet in ``snap`` reads ``nodes`` (every ManagedNode)."""
        configsets, _ = self.parse(snap)
        return any(
            "nodes" in names_read(f.template)
            for cs in configsets
            for f in cs.files
            if f.template is not None
        )


def plan_node(snap: Snapshot, identity: NodeIdentity, *, show_secrets: bool = True) -> NodePlan:
    """The plan for one node from one snapshot (local mode: ``render`` and ``apply``)."""
    return Planner(identity, show_secrets=show_secrets).plan(snap)
