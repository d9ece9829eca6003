"""Which ConfigSets apply to a node, and in which order.

Two rules, as in the established API: with ``spec.selector`` the standard LabelSelector
semantics; without it the ConfigSet's own labels are the selector (every label present and equal
on the node) and a ConfigSet without labels matches nothing, so an unlabelled object is never
applied to every host by accident.

One value per label, compared for equality, as Kubernetes and upstream's agent do. The node's
own labels carry upstream's values (host/labels.py), so a ConfigSet selects on this agent exactly
the hosts it selected on upstream's. (Earlier a node answered to kubelet's value and upstream's
alike, ``linux`` and ``arch``, ``amd64`` and ``x86_64``: that widened selection across
operating systems and architectures, and was removed.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodemanager.api import ConfigSet, InvalidObject, LabelSelector, Requirement

MAX_SHOWN = 10


def carried(labels: Mapping[str, str], key: str) -> frozenset[str]:
    """The values a node with ``labels`` answers to for ``key``: its one value, or none."""
    return frozenset({labels[key]}) if key in labels else frozenset()


def _has(labels: Mapping[str, str], key: str, value: str) -> bool:
    return labels.get(key) == value


def requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    if req.operator == "In":
        return req.key in labels and labels[req.key] in req.values
    if req.operator == "NotIn":
        return not (req.key in labels and labels[req.key] in req.values)
    if req.operator == "Exists":
        return req.key in labels
    if req.operator == "DoesNotExist":
        return req.key not in labels
    raise ValueError(f"unknown selector operator {req.operator!r}")


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector semantics: an empty selector matches every node."""
    return all(_has(labels, k, v) for k, v in selector.match_labels) and all(
        requirement_matches(r, labels) for r in selector.match_expressions
    )


def matches(configset: ConfigSet, labels: Mapping[str, str]) -> bool:
    if configset.selector is not None:
        return selector_matches(configset.selector, labels)
    if not configset.labels:
        return False
    return all(_has(labels, k, v) for k, v in configset.labels)


def select(configsets: Iterable[ConfigSet], labels: Mapping[str, str]) -> list[ConfigSet]:
    """The ConfigSets matching ``labels`` in application order: weight (lower first), then name."""
    return sorted((c for c in configsets if matches(c, labels)), key=lambda c: (c.weight, c.name))


def selector_only(raw: Mapping[str, Any]) -> ConfigSet | None:
    """The ConfigSet parsed for selection only, so an invalid spec elsewhere still selects
    (its nodes report it as InvalidSpec, and those reports must be counted)."""
    spec = raw.get("spec") or {}
    try:
        return ConfigSet.from_dict(
            {"metadata": raw.get("metadata") or {}, "spec": {"selector": spec["selector"]}}
            if spec.get("selector") is not None
            else {"metadata": raw.get("metadata") or {}}
        )
    except InvalidObject:
        return None


def wanted_values(configset: ConfigSet) -> list[tuple[str, tuple[str, ...]]]:
    """The (key, accepted values) pairs a node must carry: labels, ``matchLabels``, ``In``."""
    if configset.selector is None:
        return [(k, (v,)) for k, v in configset.labels]
    return [(k, (v,)) for k, v in configset.selector.match_labels] + [
        (r.key, tuple(r.values)) for r in configset.selector.match_expressions if r.operator == "In"
    ]


def missing_values(
    configset: ConfigSet, nodes: Iterable[Mapping[str, str]]
) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """Why ``configset`` can select none of ``nodes``: each (key, wanted values, values the nodes
    carry) that no node satisfies. Empty when every such requirement is met by some node (the
    ConfigSet may still match none through the combination)."""
    node_list = list(nodes)
    out = []
    for key, values in wanted_values(configset):
        have = sorted(set().union(*(carried(n, key) for n in node_list)) if node_list else set())
        if not set(values) & set(have):
            out.append((key, values, have))
    return out


def explain(missing: Iterable[tuple[str, tuple[str, ...], list[str]]], who: str = "nodes") -> str:
    """One line: ``label kubernetes.io/os=ubuntu: not carried (nodes carry: arch, linux)``."""
    parts = []
    for key, values, have in missing:
        # Label values only (label syntax: no free text), and a bounded number of them.
        shown = have[:MAX_SHOWN] + (
            [f"{len(have) - MAX_SHOWN} more"] if len(have) > MAX_SHOWN else []
        )
        carry = ", ".join(shown) if have else "none"
        parts.append(f"label {key}={'|'.join(values)}: not carried ({who} carry: {carry})")
    return "; ".join(parts)
