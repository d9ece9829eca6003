"""Label keys, values and selectors: Kubernetes' rule, one place, the same in the CRDs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from nodemanager.api import ConfigSet, InvalidObject
from nodemanager.api.labels import KEY_PATTERN, VALUE_PATTERN, key_problem, value_problem
from nodemanager.api.pool import NodePool
from nodemanager.host.labels import parse_label_args

CRDS = Path(__file__).parents[3] / "crds"
GOOD_KEYS = ["a", "A9", "app.kubernetes.io/name", "x/y_z-1.2", "a" * 63, "b" * 253 + "/c"]
BAD_KEYS = ["", "-a", "a-", "a b", "/a", "a/", "a/b/c", "Upper.Case/x", "a" * 64, "é",
            "²", "a\n", "b" * 254 + "/c", "x..y/z", "_a"]  # fmt: skip
GOOD_VALUES = ["", "a", "1.2_3-x", "Z" * 63]
BAD_VALUES = ["-a", "a.", "a b", "a" * 64, "é", "a\n", "a/b", "²"]


CASES = [(key_problem, KEY_PATTERN, k, True) for k in GOOD_KEYS]
CASES += [(key_problem, KEY_PATTERN, k, False) for k in BAD_KEYS]
CASES += [(value_problem, VALUE_PATTERN, v, True) for v in GOOD_VALUES]
CASES += [(value_problem, VALUE_PATTERN, v, False) for v in BAD_VALUES]


@pytest.mark.parametrize(("check", "pattern", "text", "kubernetes_takes"), CASES)
def test_keys_and_values_as_kubernetes_takes_them_in_the_parser_and_the_crds(
    check, pattern, text, kubernetes_takes
):
    assert (check(text) is None) == kubernetes_takes
    # The CRDs' pattern, as RE2 reads it ($ is the end of the text only; Python's $ also
    # matches before a final newline). A key's prefix length is left to the parser.
    prefix_too_long = check is key_problem and len(text.rpartition("/")[0]) > 253
    matched = re.search(pattern[:-1] + r"\Z", text) is not None
    assert matched == (kubernetes_takes or prefix_too_long)


def _selector_schemas():
    for crd, field in (("configsets", "selector"), ("nodepools", "nodeSelector")):
        raw = yaml.safe_load((CRDS / f"{crd}.yaml").read_text())
        spec = raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        yield spec["properties"][field]["properties"]


@pytest.mark.parametrize("schema", list(_selector_schemas()))
def test_both_crds_hold_the_parsers_patterns(schema):
    labels = schema["matchLabels"]
    assert labels["additionalProperties"]["pattern"] == VALUE_PATTERN
    (rule,) = labels["x-kubernetes-validations"]
    assert f"k.matches('{KEY_PATTERN}')" in rule["rule"]
    expression = schema["matchExpressions"]["items"]["properties"]
    assert expression["key"]["pattern"] == KEY_PATTERN
    assert expression["values"]["items"]["pattern"] == VALUE_PATTERN


BAD_SELECTORS = [
    ({"matchLabels": {"bad key": "x"}}, "matchLabels: label key 'bad key'"),
    ({"matchLabels": {"role": "web server"}}, "matchLabels: label value 'web server'"),
    (
        {"matchExpressions": [{"key": "a/b/c", "operator": "Exists"}]},
        "matchExpressions[0].key: label key",
    ),
    (
        {"matchExpressions": [{"key": "role", "operator": "In", "values": ["ok", "n o"]}]},
        "matchExpressions[0].values: label value 'n o'",
    ),
    (
        {"matchExpressions": [{"key": "role", "operator": "Gt", "values": ["1"]}]},
        "matchExpressions[0].operator",
    ),
    (
        {"matchExpressions": [{"key": "role", "operator": "Exists", "values": ["1"]}]},
        "matchExpressions[0].values",
    ),
]


@pytest.mark.parametrize(("selector", "says"), BAD_SELECTORS)
def test_a_bad_selector_names_its_field_in_a_configset_and_a_pool(selector, says):
    raw = {"metadata": {"name": "c"}, "spec": {"selector": selector}}
    with pytest.raises(InvalidObject) as bad:
        ConfigSet.from_dict(raw)
    assert f"spec.selector.{says}" in str(bad.value)
    raw = {"metadata": {"name": "p"}, "spec": {"nodeSelector": selector}}
    with pytest.raises(InvalidObject) as bad:
        NodePool.from_dict(raw)
    assert f"spec.nodeSelector.{says}" in str(bad.value)


def test_node_labels_flag_uses_the_same_rule():
    assert parse_label_args("a=1, b/c=x") == {"a": "1", "b/c": "x"}
    for bad in ("/a=1", "a=b c", "a=-x"):
        with pytest.raises(ValueError, match="label"):
            parse_label_args(bad)
