"""The CRD files parse to the schema their authors meant.

An unquoted comma inside a YAML flow mapping (`{description: a, b}`) silently adds a key: the
API server accepts the first apply and refuses every later one with a strict decoding error.
Every key of every schema node must be an OpenAPI keyword the API server knows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

CRDS = sorted((Path(__file__).resolve().parents[2] / "crds").glob("*.yaml"))
KEYWORDS = {
    "type", "description", "properties", "items", "enum", "format", "pattern", "default",
    "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "required",
    "additionalProperties", "nullable", "oneOf", "anyOf", "allOf", "not", "minProperties",
    "maxProperties", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "uniqueItems",
    "x-kubernetes-validations", "x-kubernetes-int-or-string", "x-kubernetes-list-type",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type", "x-kubernetes-embedded-resource",
}  # fmt: skip


def stray_keys(schema: dict[str, Any], path: str) -> list[str]:
    found = [f"{path}: {key!r}" for key in schema if key not in KEYWORDS]
    for name, child in (schema.get("properties") or {}).items():
        found += stray_keys(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += stray_keys(schema[key], f"{path}[]")
    return found


@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.name)
def test_every_schema_key_is_an_openapi_keyword(crd):
    for doc in yaml.safe_load_all(crd.read_text()):
        for version in doc["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            assert stray_keys(schema, version["name"]) == []
