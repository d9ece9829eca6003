"""The code blocks of the documentation, with the test marker each carries.

A block is marked by an HTML comment on the line before its fence (invisible on the site):

- ``<!-- docs-test: run NAME -->``: a test runs it (NAME says which: tests/unit/test_docs.py
  checks that NAME is one a test claims);
- ``<!-- docs-test: illustrative REASON -->``: not run, and REASON says why;
- ``<!-- docs-test: wrap KIND -->`` (YAML only): a fragment of a KIND object (``ManagedNode``)
  or of its spec (``ConfigSet.spec``), which the example test completes before sending it.

Shell blocks must carry one of these; YAML blocks holding whole objects need none (each is sent
to the API server as it is). Generated pages (docs/reference/) and the incoming notes of
unmerged branches are not documentation examples.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP = ("incoming/", "reference/")
SHELL = {"sh", "bash", "shell", "console"}
MARKER = re.compile(r"^<!-- docs-test: (run|illustrative|wrap) ?(.*?) ?-->$")
FENCE = re.compile(r"^(\s*)```(\S*)")


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str  # "run", "illustrative", "wrap" or ""
    argument: str  # the run's name, the reason, the kind

    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


SNIPPET = re.compile(r'^--8<-- "([^"]+)"$')


def include(line: str) -> str:
    """A block's line, or the file a snippet line (pymdownx.snippets) puts there, as the site
    shows it: `examples/` holds what the docs include, so the test reads the file itself."""
    match = SNIPPET.match(line)
    return (ROOT / match.group(1)).read_text() if match else line


def pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if not str(p.relative_to(DOCS)).startswith(SKIP))


def blocks(page: Path) -> Iterator[Block]:
    lines = page.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, lang = opening.group(1), opening.group(2)
        end = next(
            i for i in range(index + 1, len(lines)) if lines[i].strip() == "```"
        )  # a fence always closes: mkdocs' strict build would show one that does not
        body = (
            "\n".join(include(x.removeprefix(indent)) for x in lines[index + 1 : end]).rstrip("\n")
            + "\n"
        )
        before = lines[index - 1].strip() if index else ""
        marker = MARKER.match(before)
        yield Block(
            page=str(page.relative_to(DOCS)),
            line=index + 1,
            lang=lang,
            text=body,
            marker=marker.group(1) if marker else "",
            argument=marker.group(2) if marker else "",
        )
        index = end + 1


def every_block() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def run_block(name: str) -> Block:
    """The one block marked ``run NAME``."""
    found = [b for b in every_block() if b.marker == "run" and b.argument == name]
    assert len(found) == 1, f"expected one block marked 'docs-test: run {name}', found {found}"
    return found[0]
