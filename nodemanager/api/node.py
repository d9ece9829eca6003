"""ManagedNode as the pipeline sees it: a name, labels and the observed status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nodemanager.api.errors import FieldError, InvalidObject
from nodemanager.api.reader import Reader

KIND = "ManagedNode"


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    status: Mapping[str, Any] = field(default_factory=dict)
    generation: int = 0

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Node:
        errors: list[FieldError] = []
        meta = Reader(raw, "", errors).child("metadata")
        node = cls(
            name=meta.string("name", required=True) or "",
            labels=meta.string_map("labels"),
            status=dict(raw.get("status") or {}),
            generation=meta.integer("generation") or 0,
        )
        if errors:
            raise InvalidObject(KIND, node.name, errors)
        return node
