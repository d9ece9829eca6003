"""maxUnavailable: one rule for pools and rollouts, the same in the CRDs and in the parser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from nodemanager.api import ConfigSet, InvalidObject
from nodemanager.api.maxunavailable import PATTERN, budget, problem
from nodemanager.api.pool import NodePool

CRDS = Path(__file__).parents[3] / "crds"
GOOD = [1, 3, "1", "3", "007", "1%", "25%", "100%", "0100%", 10**6]
BAD = [0, -1, "0", "00", "0%", "150%", "101%", "-1", "²", "1²", "²%", "١%", "5 ", "5\n", "",
       "%", "lots", True, None, 1.5, [1]]  # fmt: skip


@pytest.mark.parametrize("value", GOOD)
def test_counts_of_at_least_one_and_percentages_up_to_100_are_taken(value):
    assert problem(value) is None


@pytest.mark.parametrize("value", BAD)
def test_zero_over_100_percent_and_non_ascii_digits_are_refused_in_every_form(value):
    assert problem(value)


@pytest.mark.parametrize("value", [v for v in GOOD + BAD if isinstance(v, str)])
def test_the_crd_pattern_agrees_with_the_parser(value):
    # The API server checks strings with PATTERN in RE2, whose $ is the end of the text only
    # (Python's also matches before a final newline: \Z is RE2's $ here).
    assert PATTERN.endswith("$")
    assert (re.search(PATTERN[:-1] + r"\Z", value) is not None) == (problem(value) is None)


def _max_unavailable_schemas():
    pools = yaml.safe_load((CRDS / "nodepools.yaml").read_text())
    configsets = yaml.safe_load((CRDS / "configsets.yaml").read_text())
    pool_spec = pools["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    cs_spec = configsets["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return [
        pool_spec["properties"]["maxUnavailable"],
        cs_spec["properties"]["rollout"]["properties"]["maxUnavailable"],
    ]


def test_both_crds_hold_the_same_rule():
    for schema in _max_unavailable_schemas():
        assert schema["pattern"] == PATTERN
        assert [v["rule"] for v in schema["x-kubernetes-validations"]] == [
            "type(self) == string || self >= 1"
        ]


@pytest.mark.parametrize(
    ("value", "nodes", "want"),
    [(1, 10, 1), ("3", 10, 3), ("25%", 10, 2), ("10%", 5, 1), ("100%", 4, 4), ("²", 9, 1)],
)
def test_budget_rounds_down_is_at_least_one_and_never_raises(value, nodes, want):
    assert budget(value, nodes) == want


@pytest.mark.parametrize("value", [0, "0", "0%", "150%", "²"])
def test_a_pool_and_a_configset_name_the_field(value):
    with pytest.raises(InvalidObject, match=r"spec\.maxUnavailable: must"):
        NodePool.from_dict({"metadata": {"name": "p"}, "spec": {"maxUnavailable": value}})
    raw = {"metadata": {"name": "c"}, "spec": {"rollout": {"maxUnavailable": value}}}
    with pytest.raises(InvalidObject, match=r"spec\.rollout\.maxUnavailable: must"):
        ConfigSet.from_dict(raw)
