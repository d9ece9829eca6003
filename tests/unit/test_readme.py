"""The README starts with the two commands a new user runs, and every link in the README and
docs/ points to a file inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_readme_starts_with_demo_and_test():
    first_block = ROOT.joinpath("README.md").read_text().split("```")[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()[1:] if line]
    assert commands == ["make demo", "make test"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_inside_the_repository(doc):
    # Code is not a link: the generated reference shows patterns such as `[a-z]([-a-z]*)`.
    text = re.sub(r"```.*?```|`[^`\n]*`", "", doc.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)]+)\)", text):
        path = target.split("#")[0]
        if not path:
            continue  # a heading in the same file
        assert "://" not in target, f"{doc.name}: external link {target}"
        resolved = (doc.parent / path).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{doc.name}: {target}"
