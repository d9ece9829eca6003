"""deploy/publisher.py: a release names a real maintainer and home page, set in one place, or
refuses to build in one line (the packages said `@localhost` and `.invalid`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "deploy"))
import publisher  # noqa: E402  (deploy/publisher.py)


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch):
    for name in ("NODEMANAGER_MAINTAINER", "NODEMANAGER_URL"):
        monkeypatch.delenv(name, raising=False)


def settings(tmp_path: Path, maintainer: str, url: str) -> Path:
    path = tmp_path / "publisher.toml"
    path.write_text(f"maintainer = {maintainer!r}\nurl = {url!r}\n")
    return path


def test_a_real_publisher_is_taken_from_the_file(tmp_path):
    got = publisher.load(settings(tmp_path, "Ada Admin <ada@nodemanager.dev>", "https://x.dev/"))
    assert (
        got.maintainer == "Ada Admin <ada@nodemanager.dev>" and got.email == "ada@nodemanager.dev"
    )


def test_the_environment_overrides_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEMANAGER_MAINTAINER", "CI Bot <ci@nodemanager.dev>")
    got = publisher.load(settings(tmp_path, "Ada Admin <ada@nodemanager.dev>", "https://x.dev/"))
    assert got.maintainer == "CI Bot <ci@nodemanager.dev>" and got.url == "https://x.dev/"


@pytest.mark.parametrize(
    ("maintainer", "url", "said"),
    [
        ("", "", "maintainer '' is not 'Full Name <address@domain>'"),
        ("nodemanager <nodemanager@localhost>", "https://x.dev/", "is not 'Full Name"),
        ("A <a@nodemanager.invalid>", "https://x.dev/", "is a placeholder"),
        ("A <a@x.dev>", "https://nodemanager.invalid/", "is a placeholder"),
        ("A <a@x.dev>", "http://x.dev/", "is not an https:// address"),
        ("A <a@example.org>", "https://x.dev/", "is a placeholder"),  # only for the tests
    ],
)
def test_a_missing_or_placeholder_publisher_stops_the_release(tmp_path, maintainer, url, said):
    with pytest.raises(SystemExit) as refused:
        publisher.load(settings(tmp_path, maintainer, url))
    message = str(refused.value)
    assert said in message and "\n" not in message and "publisher.toml" in message


def test_the_test_suite_may_use_example_addresses_and_nothing_else(tmp_path):
    ok = settings(tmp_path, "T <t@nodemanager.example.org>", "https://nodemanager.example.org/")
    assert publisher.load(ok, allow_placeholders=True).url == "https://nodemanager.example.org/"
    with pytest.raises(SystemExit):
        publisher.load(settings(tmp_path, "T <t@localhost>", "https://x.dev/"), True)


def test_release_refuses_before_building_anything(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NODEMANAGER_")}
    env["NODEMANAGER_MAINTAINER"] = "nodemanager <nodemanager@localhost>"  # whatever the file says
    done = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "release.py"), str(tmp_path / "dist")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("release: maintainer 'nodemanager <nodemanager@localhost>'")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert list((tmp_path / "dist").iterdir()) == []
