"""The documentation keeps up with the code: generated pages current, every example accounted for.

The examples themselves run elsewhere: YAML and the cluster walk-through in
tests/cluster/test_docs_examples.py, local mode in tests/integration/test_docs_local.py. Here:
what needs no API server and no Ansible (about 2 s).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import yaml

from tests.docs_blocks import DOCS, ROOT, SHELL, every_block, run_block

# The blocks marked `docs-test: run NAME`, and the test that runs each.
RUNS = {
    "local": "tests/integration/test_docs_local.py",
    "local-mode": "tests/integration/test_docs_local.py",
    "cluster": "tests/cluster/test_docs_examples.py",
}


def test_generated_reference_pages_are_current():
    proc = subprocess.run(
        [sys.executable, str(DOCS / "gen.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_every_crd_field_has_a_description():
    sys.path.insert(0, str(DOCS))
    try:
        import gen  # docs/gen.py, not a package
    finally:
        sys.path.remove(str(DOCS))
    assert gen.undescribed() == []


def test_every_shell_block_is_run_or_says_why_not():
    unmarked, unknown = [], []
    for block in every_block():
        if block.lang not in SHELL:
            continue
        if block.marker == "run":
            if block.argument not in RUNS:
                unknown.append(f"{block.where()}: run {block.argument!r}")
        elif block.marker != "illustrative" or len(block.argument) < 10:
            unmarked.append(block.where())
    assert not unmarked, f"shell blocks neither run nor marked illustrative (why): {unmarked}"
    assert not unknown, f"run markers no test claims (RUNS): {unknown}"
    for name in RUNS:
        run_block(name)  # each claimed block exists exactly once


def test_every_yaml_block_is_an_object_or_a_marked_fragment():
    problems = []
    for block in every_block():
        if block.lang != "yaml":
            continue
        docs = [d for d in yaml.safe_load_all(block.text) if d is not None]
        whole = all(isinstance(d, dict) and "apiVersion" in d and "kind" in d for d in docs)
        if docs and whole and not block.marker:
            continue
        if block.marker == "wrap" and block.argument.split(".")[0] in (
            "ConfigSet",
            "ManagedNode",
            "NodePool",
        ):
            continue
        if block.marker == "illustrative" and block.argument:
            continue
        problems.append(block.where())
    assert not problems, f"YAML blocks that are neither objects nor marked fragments: {problems}"


def test_monitoring_page_names_every_alert_and_a_runbook_each():
    rules = yaml.safe_load((ROOT / "deploy/monitoring/nodemanager-alerts.yaml").read_text())
    alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
    page = (DOCS / "operations/monitoring.md").read_text()
    assert alerts and all(f"| `{a}` |" in page for a in alerts), alerts
    for runbook in re.findall(r"\]\(\.\./(runbooks/\w+\.md)\)", page):
        assert (DOCS / runbook).exists(), runbook


def test_dashboards_page_names_every_panel():
    board = json.loads((ROOT / "deploy/monitoring/nodemanager-dashboard.json").read_text())
    page = (DOCS / "operations/dashboards.md").read_text()
    missing = [p["title"] for p in board["panels"] if f"| {p['title']} |" not in page]
    assert not missing, missing


def test_architecture_names_every_import_contract():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    page = (DOCS / "architecture.md").read_text()
    missing = [c["name"] for c in contracts["contracts"] if f"| {c['name']} |" not in page]
    assert not missing, f"docs/architecture.md does not describe: {missing}"


def words(line: str) -> str:
    return " ".join(line.split("  #")[0].split()).removesuffix(" &")


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 150, len(lines)
    assert lines[0] == "# nodemanager"
    first = [b for b in re.findall(r"```sh\n(.*?)```", text, re.S)]
    assert [words(x).split()[:2] for x in first[0].splitlines()] == [
        ["make", "demo"],
        ["make", "test"],
    ]
    assert "../shared" not in text and "/work/" not in text
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links to a missing {target}"
    # The quick start is the tested walk-through, line for line.
    tested = {words(x) for name in ("local", "cluster") for x in run_block(name).text.splitlines()}
    for block in first[1:]:
        for line in block.splitlines():
            assert words(line) in tested, f"README's {line!r} is not on the tested page"
