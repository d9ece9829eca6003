"""Merge the selected ConfigSets into one desired state for the node.

A resource is identified by kind and key (package name, file path, service name, execution
argv). The same declaration in several ConfigSets merges silently; differing declarations are a
conflict: that resource is applied from neither side and both ConfigSets are told, while every
other resource still applies. Order follows the ConfigSets' application order (weight, then
name), and within a ConfigSet packages, files, services, executions — the order in which a host
is usually built.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from nodemanager.api import ConfigSet, Execution, File, Package, Service

Spec = Package | File | Service | Execution


@dataclass(frozen=True)
class Resource:
    kind: str  # package | file | service | execution
    key: str
    spec: Spec
    configsets: tuple[str, ...]  # every ConfigSet that declares it, in application order

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.key}"


@dataclass(frozen=True)
class Conflict:
    resource: str  # Resource.id
    configsets: tuple[str, ...]

    def message(self) -> str:
        return f"{self.resource} is declared differently by {', '.join(self.configsets)}"


@dataclass(frozen=True)
class DesiredState:
    configsets: tuple[ConfigSet, ...]
    resources: tuple[Resource, ...]
    conflicts: tuple[Conflict, ...] = ()

    def conflicts_of(self, configset: str) -> list[str]:
        return [c.resource for c in self.conflicts if configset in c.configsets]

    def of_kind(self, kind: str) -> list[Resource]:
        return [r for r in self.resources if r.kind == kind]


def declarations(configset: ConfigSet) -> Iterable[tuple[str, str, Spec]]:
    for p in configset.packages:
        yield "package", p.name, p
    for f in configset.files:
        yield "file", f.path, f
    for s in configset.services:
        yield "service", s.name, s
    for e in configset.executions:
        yield "execution", shlex.join(e.argv), e


def merge(configsets: Iterable[ConfigSet]) -> DesiredState:
    """Merge ConfigSets given in application order (see ``desired.select.select``)."""
    configsets = tuple(configsets)
    specs: dict[tuple[str, str], list[tuple[str, Spec]]] = {}
    for cs in configsets:
        for kind, key, spec in declarations(cs):
            specs.setdefault((kind, key), []).append((cs.name, spec))

    resources, conflicts = [], []
    for (kind, key), declared in specs.items():
        owners = tuple(dict.fromkeys(name for name, _ in declared))
        if len({spec for _, spec in declared}) > 1:
            conflicts.append(Conflict(f"{kind}:{key}", owners))
        else:
            resources.append(Resource(kind, key, declared[0][1], owners))
    return DesiredState(configsets, tuple(resources), tuple(conflicts))
