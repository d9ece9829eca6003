"""Local sources: ConfigSets read from files and directories (``-f PATH``), like kubelet's file
source. Each document is parsed on its own, so one bad document is reported and the rest apply.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nodemanager.api import ConfigSet, InvalidObject

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Loaded:
    configsets: list[ConfigSet] = field(default_factory=list)
    secrets: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # name -> key -> base64, as the API holds them
    configmaps: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # "<file>: <message>", one per bad document


def _secret_data(doc: dict[str, Any]) -> dict[str, str]:
    data = dict(doc.get("data") or {})
    for key, value in (doc.get("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    return data


def _text(path: Path) -> str:
    """A file's text; ``-`` is standard input, as with kubectl."""
    return sys.stdin.read() if str(path) == "-" else path.read_text()


def _documents_of(path: Path) -> list[Any]:
    """The YAML documents of a file, parsed with libyaml when present and streamed from the
    file: the pure-Python parser takes minutes for a 50 MB content, and the whole text would
    be held beside its parse."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    if str(path) == "-":
        return list(yaml.load_all(_text(path), Loader=loader))
    with open(path, "rb") as stream:
        return list(yaml.load_all(stream, Loader=loader))


def _meant_as_configset(doc: Any, kind: Any) -> bool:
    """A document to parse as a ConfigSet: one without kind, one of kind ConfigSet in any case
    (``Configset`` is a mistake to report, not another kind to skip), or any kind in our API
    group."""
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


def load(paths: Iterable[str]) -> Loaded:
    """Every ConfigSet in ``paths`` (files, or directories searched for *.yaml/*.yml/*.json)."""
    out = Loaded()
    for path in _files(paths):
        try:
            docs = _documents_of(path)
        except (OSError, yaml.YAMLError) as e:
            out.errors.append(f"{path}: {e}")
            continue
        for index, doc in enumerate(d for raw in docs for d in _documents(raw)):
            kind = doc.get("kind") if isinstance(doc, dict) else None
            name = (
                ((doc or {}).get("metadata") or {}).get("name", "") if isinstance(doc, dict) else ""
            )
            if kind == "Secret":
                out.secrets[name] = _secret_data(doc)
                continue
            if kind == "ConfigMap":
                out.configmaps[name] = {k: str(v) for k, v in (doc.get("data") or {}).items()}
                continue
            if not _meant_as_configset(doc, kind):
                continue  # other kinds (Namespaces, RBAC) may share the file
            try:
                # Strict, as kubectl: unknown fields, wrong apiVersion or kind are errors.
                out.configsets.append(ConfigSet.from_dict(doc, strict=True))
            except InvalidObject as e:
                out.errors.append(f"{path} (document {index + 1}): {e}")
    return out
