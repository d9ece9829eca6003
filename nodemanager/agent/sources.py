"""Local sources: ConfigSets read from files and directories (``-f PATH``), like kubelet's file
source. Each document is parsed on its own, so one bad document is reported and the rest apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml

from nodemanager.api import ConfigSet, InvalidObject

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass
class Loaded:
    configsets: list[ConfigSet] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # "<file>: <message>", one per bad document


def _files(paths: Iterable[str]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(f for f in p.rglob("*") if f.suffix in YAML_SUFFIXES and f.is_file())
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
            docs = list(yaml.safe_load_all(path.read_text()))
        except (OSError, yaml.YAMLError) as e:
            out.errors.append(f"{path}: {e}")
            continue
        for index, doc in enumerate(d for raw in docs for d in _documents(raw)):
            if isinstance(doc, dict) and doc.get("kind") not in (None, "ConfigSet"):
                continue  # other kinds (Namespaces, Secrets) may share the file
            try:
                out.configsets.append(ConfigSet.from_dict(doc))
            except InvalidObject as e:
                out.errors.append(f"{path} (document {index + 1}): {e}")
    return out
