"""Every field the CRD defines is accepted by the strict (local file) reader: an object read
from the cluster renders and applies from a file as it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from nodemanager.api import ConfigSet
from nodemanager.api.configset import API_VERSION
from nodemanager.api.errors import InvalidObject

CRD = Path(__file__).parents[3] / "crds" / "configsets.yaml"
SAMPLE = {"string": "x", "integer": 1, "boolean": True, "object": {}, "array": []}


def _paths(schema: dict[str, Any], path: str) -> Iterator[tuple[str, Any]]:
    """(path, sample value) of every property below ``schema``, list items as ``[0]``."""
    for name, sub in schema.get("properties", {}).items():
        here = f"{path}.{name}" if path else name
        yield here, SAMPLE.get(sub.get("type", "string"), "x")
        yield from _paths(sub, here)
        if sub.get("type") == "array":
            yield from _paths(sub.get("items", {}), f"{here}[0]")


def _set(raw: dict[str, Any], path: str, value: Any) -> None:
    node: Any = raw
    parts = path.replace("[0]", ".[0]").split(".")
    for part, nxt in zip(parts, parts[1:], strict=False):
        if part == "[0]":
            node = node[0]
            continue
        if nxt == "[0]":
            node = node.setdefault(part, [{}])
        else:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                return
    if parts[-1] != "[0]" and isinstance(node, dict):
        node[parts[-1]] = value


def _unknown(raw: dict[str, Any]) -> list[str]:
    try:
        ConfigSet.from_dict(raw, strict=True)
    except InvalidObject as e:
        return [f.field for f in e.errors if f.message == "unknown field"]
    return []


def test_every_crd_spec_field_is_known():
    crd = yaml.safe_load(CRD.read_text())
    fields = []
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        fields += list(_paths(schema, "spec"))
    assert {"spec.rollout", "spec.paused", "spec.rollout.maxUnavailable"} <= {p for p, _ in fields}
    for path, value in fields:
        raw: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "ConfigSet",
            "metadata": {"name": "c"},
        }
        _set(raw, path, value)
        assert _unknown(raw) == [], path


def test_an_unknown_field_is_still_refused():
    raw = {"apiVersion": API_VERSION, "kind": "ConfigSet", "metadata": {"name": "c"}}
    assert _unknown({**raw, "spec": {"rollouts": {}}}) == ["spec.rollouts"]
