"""Where a node's inputs come from, in one shape: the ``Snapshot``.

Two sources fill it, in the style of kubelet's merged config sources: the cluster (the daemon
copies its informers' caches) and files (``-f PATH`` in local mode, read here). Everything after
(parsing, selection, merge, templates, the plan) is one pipeline: ``agent/plan.py``.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nodemanager.agent import largeyaml

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Snapshot:
    """The raw inputs of one reconcile, as the API (or a file) holds them."""

    node: dict[str, Any]  # this node's ManagedNode (local mode: name and labels only)
    configsets: list[dict[str, Any]] = field(default_factory=list)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> key -> base64
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> key -> text
    nodes: list[dict[str, Any]] = field(default_factory=list)  # every ManagedNode, when read
    # Where each ConfigSet came from ("<file> (document 2)"), parallel to ``configsets``;
    # empty for the cluster, whose objects are named by the API.
    origins: list[str] = field(default_factory=list)
    # Parse as kubectl would (unknown fields, a wrong apiVersion or kind are errors): files are
    # checked by nobody else, while the API server has already applied the CRD's schema.
    strict: bool = False

    def origin(self, index: int) -> str:
        return self.origins[index] if index < len(self.origins) else ""


@dataclass
class Loaded:
    """What local files hold: a Snapshot without a node, and the files that could not be read."""

    snapshot: Snapshot
    errors: list[str] = field(default_factory=list)  # "<file>: <message>", unreadable YAML
    # "<file> (document n): ManagedNode x": our other kinds, which a -f may well include
    skipped: list[str] = field(default_factory=list)


def _secret_data(doc: dict[str, Any]) -> dict[str, str]:
    data = dict(doc.get("data") or {})
    for key, value in (doc.get("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return data


def _text(path: Path) -> str:
    """A file's text; ``-`` is standard input, as with kubectl."""
    return sys.stdin.read() if str(path) == "-" else path.read_text()


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_BaseLoader):  # type: ignore[misc]
    """The safe loader, refusing a key repeated in one mapping as kubectl does: PyYAML would
    keep the last value silently, so a typo'd copy of a block would win unseen."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # '<<' merges; a merged key overridden here is meant
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                line = key_node.start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} at line {line}", key_node.start_mark
                )
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


def _documents_of(path: Path) -> list[Any]:
    """The YAML documents of a file, parsed with libyaml when present and streamed from the
    file: the pure-Python parser takes minutes for a 50 MB content, and the whole text would
    be held beside its parse. A key repeated in one mapping is an error naming key and line."""
    loader = _UniqueKeyLoader
    if str(path) == "-":
        return list(yaml.load_all(_text(path), Loader=loader))
    apart = largeyaml.load_all(path, loader)  # long contents without a second copy
    if apart is not None:
        return apart
    with open(path, "rb") as stream:
        return list(yaml.load_all(stream, Loader=loader))


# Kinds of our API group that are not ConfigSets: skipped by name, not parsed as a broken
# ConfigSet (`render -f` of a ManagedNode said "ConfigSet ... is invalid").
OTHER_KINDS = ("ManagedNode",)


def _meant_as_configset(doc: Any, kind: Any) -> bool:
    """A document to parse as a ConfigSet: one without kind, one of kind ConfigSet in any case
    (``Configset`` is a mistake to report, not another kind to skip), or any kind in our API
    group but ``OTHER_KINDS``."""
    api_version = doc.get("apiVersion") if isinstance(doc, dict) else None
    return (
        kind is None
        or str(kind).lower() == "configset"
        or str(api_version or "").startswith("common.nodemanager/")
    )


def _files(paths: Iterable[str]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            # Not recursive, as `kubectl apply -f DIR`: examples/cluster/ stays out of examples/.
            yield from sorted(f for f in p.glob("*") if f.suffix in YAML_SUFFIXES and f.is_file())
        else:
            yield p


def _documents(raw: Any) -> Iterator[Any]:
    if isinstance(raw, dict) and raw.get("kind") == "List":
        yield from raw.get("items") or []
    elif raw is not None:
        yield raw


def load(paths: Iterable[str], node: dict[str, Any] | None = None) -> Loaded:
    """Every ConfigSet, Secret and ConfigMap in ``paths`` (files, or directories searched for
    *.yaml/*.yml/*.json). Documents are kept raw: the pipeline parses them, so one bad document
    is reported (with its file) and the rest apply."""
    snap = Snapshot(node=node or {"metadata": {}}, strict=True)
    out = Loaded(snap)
    for path in _files(paths):
        try:
            docs = _documents_of(path)
        except (OSError, yaml.YAMLError) as e:
            out.errors.append(f"{path}: {e}")
            continue
        for index, doc in enumerate(d for raw in docs for d in _documents(raw)):
            kind = doc.get("kind") if isinstance(doc, dict) else None
            if kind in ("Secret", "ConfigMap"):
                name = str((doc.get("metadata") or {}).get("name", ""))
                if kind == "Secret":
                    snap.secrets[name] = _secret_data(doc)
                else:
                    snap.configmaps[name] = {k: str(v) for k, v in (doc.get("data") or {}).items()}
                continue
            if kind in OTHER_KINDS:
                name = (doc.get("metadata") or {}).get("name", "<unnamed>")
                out.skipped.append(f"{path} (document {index + 1}): {kind} {name}")
                continue
            if not _meant_as_configset(doc, kind):
                continue  # other kinds (Namespaces, RBAC) may share the file
            snap.configsets.append(doc)
            snap.origins.append(f"{path} (document {index + 1})")
    return out
