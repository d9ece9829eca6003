"""Label keys, values and selector operators as Kubernetes validates them (apimachinery's
IsQualifiedName, IsValidLabelValue and the LabelSelector operators): one rule for the agent's
``--node-labels``, ConfigSet ``spec.selector`` and NodePool ``spec.nodeSelector``. A selector
the API server would refuse on a Deployment is refused here, so a typo reads as an error
instead of a selector that quietly matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nodemanager.api.reader import Reader

# ASCII classes and fullmatch: "$" would also take a final newline.
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NAME_MAX, PREFIX_MAX = 63, 253
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# The CRDs' patterns (RE2) for the same rule; a key's prefix length (at most 253) is left to
# the parser. Unit tests hold them to key_problem and value_problem.
KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$"
)
VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
_SHAPE = "63 characters or less, alphanumerics with -_. inside"


def key_problem(key: str) -> str | None:
    """Why ``key`` is not a label key (``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (len(prefix) > PREFIX_MAX or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return f"label key {key!r}: prefix must be a DNS subdomain"
    if len(name) > NAME_MAX or not _NAME.fullmatch(name):
        return f"label key {key!r}: name must be {_SHAPE}"
    return None


def value_problem(value: str) -> str | None:
    """Why ``value`` is not a label value (empty, or a name), or None."""
    if value and (len(value) > NAME_MAX or not _NAME.fullmatch(value)):
        return f"label value {value!r} must be empty or {_SHAPE}"
    return None


def values_problem(operator: str, values: tuple[str, ...]) -> str | None:
    """Why ``values`` do not go with ``operator`` in a matchExpression, or None."""
    if operator in ("In", "NotIn") and not values:
        return f"must be non-empty for operator {operator}"
    if operator in ("Exists", "DoesNotExist") and values:
        return f"must be empty for operator {operator}"
    return next(filter(None, map(value_problem, values)), None)


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class LabelSelector:
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


def selector(r: Reader) -> LabelSelector:
    """Parse a label selector (``matchLabels``, ``matchExpressions``), naming each bad key,
    value and operator with its field path."""
    match_labels = r.string_map("matchLabels")
    for key, value in sorted(match_labels.items()):
        why = key_problem(key) or value_problem(value)
        if why:
            r.error("matchLabels", why)
    expressions = []
    for e in r.items("matchExpressions"):
        op = e.choice("operator", OPERATORS, default=None, required=True) or ""
        values = e.strings("values")
        if op and (why := values_problem(op, values)):
            e.error("values", why)
        key = e.string("key", required=True) or ""
        if key and (why := key_problem(key)):
            e.error("key", why)
        expressions.append(Requirement(key, op, values))
    return LabelSelector(tuple(sorted(match_labels.items())), tuple(expressions))
