"""Which ConfigSets apply to a node, and in which order.

Two rules, as in the established API: with ``spec.selector`` the standard LabelSelector
semantics; without it the ConfigSet's own labels are the selector (every label present and equal
on the node) and a ConfigSet without labels matches nothing, so an unlabelled object is never
applied to every host by accident.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nodemanager.api import ConfigSet, LabelSelector, Requirement


def requirement_matches(req: Requirement, labels: Mapping[str, str]) -> bool:
    if req.operator == "In":
        return req.key in labels and labels[req.key] in req.values
    if req.operator == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if req.operator == "Exists":
        return req.key in labels
    if req.operator == "DoesNotExist":
        return req.key not in labels
    raise ValueError(f"unknown selector operator {req.operator!r}")


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes LabelSelector semantics: an empty selector matches every node."""
    return all(labels.get(k) == v for k, v in selector.match_labels) and all(
        requirement_matches(r, labels) for r in selector.match_expressions
    )


def matches(configset: ConfigSet, labels: Mapping[str, str]) -> bool:
    if configset.selector is not None:
        return selector_matches(configset.selector, labels)
    if not configset.labels:
        return False
    return all(labels.get(k) == v for k, v in configset.labels)


def select(configsets: Iterable[ConfigSet], labels: Mapping[str, str]) -> list[ConfigSet]:
    """The ConfigSets matching ``labels`` in application order: weight (lower first), then name."""
    return sorted((c for c in configsets if matches(c, labels)), key=lambda c: (c.weight, c.name))
