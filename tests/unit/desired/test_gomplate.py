"""gomplate translation is bounded like everything that reads a ConfigSet author's text."""

from __future__ import annotations

import time

from nodemanager.desired.gomplate import MAX_DEPTH, translate


def test_deep_nesting_is_a_problem_of_its_action_not_a_recursion_error():
    nested = "{{ " + "(" * 2000 + ".Node.Name" + ")" * 2000 + " }}"
    out = translate("a\n" + nested + "\nb")
    (problem,) = out.problems
    assert problem.startswith("line 2: {{ (((") and problem.endswith(
        f"nested deeper than {MAX_DEPTH} parentheses"
    )
    assert out.text.endswith(nested + "\nb")  # left as it was
    fine = translate("{{ " + "(" * 10 + '(ds "data").Node.Name' + ")" * 10 + " }}")
    assert fine.problems == [] and "node.name" in fine.text


def test_scanning_is_linear_in_the_text():
    started = time.process_time()
    for text in ("{{" * 200_000, "{{ .Node.Name }}\n" * 20_000, "}}{{-" * 100_000):
        translate(text)
    assert time.process_time() - started < 10  # quadratic took minutes for the first alone
