"""Unit tests never sleep (issue 35): a wait ends on the event it waits for (tests/waits.py
``eventually``), so the rule is checked over their source, calls only (a script in a string that
a test runs as a child process is that program's business)."""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).resolve().parent


def sleeps(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name == "sleep" and owner in ("", "time", "asyncio"):
            lines.append(node.lineno)
    return lines


def test_no_unit_test_sleeps():
    found = {
        str(p.relative_to(UNIT)): lines for p in sorted(UNIT.rglob("*.py")) if (lines := sleeps(p))
    }
    assert not found, f"sleeps in unit tests (wait with tests.waits.eventually): {found}"


def test_the_check_finds_a_sleep(tmp_path):
    sample = tmp_path / "t.py"
    sample.write_text(
        "import time\nfrom time import sleep\ntime.sleep(1)\nsleep(2)\n'time.sleep(3)'\n"
    )
    assert sleeps(sample) == [3, 4]
