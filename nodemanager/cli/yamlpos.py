"""Where a field sits in YAML text: line numbers for reports about documents read or printed.

``positions(text)`` gives, per document, each field path's line (1-based) and, for a block
scalar (``|``), the line before its first content line, so line ``k`` of a template is at
``base + k``."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Spot:
    line: int  # the field's line
    block: int | None  # a block scalar's indicator line: its content line k is block + k


Spots = dict[Path, "Spot"]


def _walk(node: yaml.Node, path: Path, out: dict[Path, Spot]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = (*path, str(key.value))
            block = (
                value.start_mark.line + 1 if getattr(value, "style", None) in ("|", ">") else None
            )
            out[sub] = Spot(key.start_mark.line + 1, block)
            _walk(value, sub, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[(*path, i)] = Spot(item.start_mark.line + 1, None)
            _walk(item, (*path, i), out)


def positions(text: str) -> list[dict[Path, Spot]]:
    """Per document of ``text`` (empty ones included, as ``safe_load_all`` yields them)."""
    out = []
    for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
        spots: dict[Path, Spot] = {}
        if node is not None:
            spots[()] = Spot(node.start_mark.line + 1, None)
            _walk(node, (), spots)
        out.append(spots)
    return out


def line_of(spots: dict[Path, Spot], path: Path, inner: int = 0) -> int | None:
    """The line of ``path`` (of its ``inner``-th content line for a block scalar), or of the
    nearest enclosing field present; None without any."""
    while True:
        spot = spots.get(path)
        if spot is not None:
            return spot.block + inner if inner and spot.block is not None else spot.line
        if not path:
            return None
        path = path[:-1]


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks (templates stay readable, and lines countable)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def dump_all(docs: list[dict[str, object]]) -> str:
    """``yaml.safe_dump_all`` with block scalars where PyYAML can keep them exact."""
    return yaml.dump_all(docs, Dumper=_BlockDumper, sort_keys=False)
