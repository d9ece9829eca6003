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
from typing import Literal, cast

from nodemanager.api import ConfigSet, Execution, File, Package, Service

Spec = Package | File | Service | Execution
Kind = Literal["package", "file", "service", "execution"]
KINDS: tuple[Kind, ...] = ("package", "file", "service", "execution")


class ResourceId(str):
    """A resource's identity, (kind, key), in its one text form ``kind:key``.

    A ``str`` so the ids already in task origins, TaskResults, status messages and the saved
    digests keep working unchanged; ``kind`` and ``key`` read the parts without re-splitting at
    every use."""

    __slots__ = ()

    @classmethod
    def of(cls, kind: Kind, key: str) -> ResourceId:
        return cls(f"{kind}:{key}")

    @property
    def kind(self) -> Kind:
        return cast(Kind, self.partition(":")[0])

    @property
    def key(self) -> str:
        return self.partition(":")[2]


@dataclass(frozen=True)
class Resource:
    kind: Kind
    key: str
    spec: Spec
    configsets: tuple[str, ...]  # every ConfigSet that declares it, in application order
    # Where each of those ConfigSets declares it ("spec.files[3]"), so every error names the field.
    fields: tuple[str, ...] = ()

    @property
    def id(self) -> ResourceId:
        return ResourceId.of(self.kind, self.key)

    @property
    def field(self) -> str:
        """The field of the first declaring ConfigSet (where an error is reported)."""
        return self.fields[0] if self.fields else ""


@dataclass(frozen=True)
class Conflict:
    resource: ResourceId
    configsets: tuple[str, ...]

    def message(self) -> str:
        return f"{self.resource} is declared differently by {', '.join(self.configsets)}"


@dataclass(frozen=True)
class DesiredState:
    configsets: tuple[ConfigSet, ...]
    resources: tuple[Resource, ...]
    conflicts: tuple[Conflict, ...] = ()

    def conflicts_of(self, configset: str) -> list[ResourceId]:
        return [c.resource for c in self.conflicts if configset in c.configsets]

    def of_kind(self, kind: Kind) -> list[Resource]:
        return [r for r in self.resources if r.kind == kind]


def declarations(configset: ConfigSet) -> Iterable[tuple[Kind, str, Spec, str]]:
    """(kind, key, spec, field path) of every resource ``configset`` declares."""
    for i, p in enumerate(configset.packages):
        yield "package", p.name, p, f"spec.packages[{i}]"
    for i, f in enumerate(configset.files):
        yield "file", f.path, f, f"spec.files[{i}]"
    for i, s in enumerate(configset.services):
        yield "service", s.name, s, f"spec.services[{i}]"
    for i, e in enumerate(configset.executions):
        yield "execution", shlex.join(e.argv), e, f"spec.executions[{i}]"


def merge(configsets: Iterable[ConfigSet]) -> DesiredState:
    """Merge ConfigSets given in application order (see ``desired.select.select``)."""
    configsets = tuple(configsets)
    specs: dict[tuple[Kind, str], list[tuple[str, Spec, str]]] = {}
    for cs in configsets:
        for kind, key, spec, path in declarations(cs):
            specs.setdefault((kind, key), []).append((cs.name, spec, path))

    resources, conflicts = [], []
    for (kind, key), declared in specs.items():
        owners = tuple(dict.fromkeys(name for name, _, _ in declared))
        if len({spec for _, spec, _ in declared}) > 1:
            conflicts.append(Conflict(ResourceId.of(kind, key), owners))
        else:
            first: dict[str, str] = {}
            for name, _, path in declared:
                first.setdefault(name, path)
            fields = tuple(first[name] for name in owners)
            resources.append(Resource(kind, key, declared[0][1], owners, fields))
    return DesiredState(configsets, tuple(resources), tuple(conflicts))
