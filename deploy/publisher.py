"""The release's maintainer and home page, from deploy/publisher.toml or the environment.

Every package and recipe names them (the .deb's Maintainer and Homepage, the PKGBUILD's and
APKBUILD's Maintainer line and url, the port's MAINTAINER and WWW), so they are set in one
place; and required: a package that says `@localhost` or `.invalid` reaches users with nobody
to report to. A value that is empty or a placeholder stops the build in one line.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

SETTINGS = Path(__file__).resolve().with_name("publisher.toml")
MAINTAINER = re.compile(r"^(?P<name>[^<>@\n]+?) <(?P<email>[^<>@\s]+@[^<>@\s]+\.[a-z]{2,})>$")
URL = re.compile(r"^https://[A-Za-z0-9.-]+\.[a-z]{2,}(?:/[^\s\"'`$\\]*)?$")
PLACEHOLDER = re.compile(r"(@|\.)(localhost|invalid|example)(\.[a-z]+)?\b", re.I)


@dataclass(frozen=True)
class Publisher:
    maintainer: str  # "Full Name <address@domain>"
    url: str  # https://...

    @property
    def email(self) -> str:
        m = MAINTAINER.match(self.maintainer)
        assert m is not None
        return m["email"]


def load(settings: Path = SETTINGS, allow_placeholders: bool = False) -> Publisher:
    """The publisher, validated. ``allow_placeholders``: example.org addresses pass (the test
    suite builds releases with them), `localhost` and `.invalid` never."""
    raw = tomllib.loads(settings.read_text()) if settings.exists() else {}
    maintainer = os.environ.get("NODEMANAGER_MAINTAINER") or str(raw.get("maintainer", ""))
    url = os.environ.get("NODEMANAGER_URL") or str(raw.get("url", ""))
    problems = []
    if not MAINTAINER.match(maintainer):
        problems.append(f"maintainer {maintainer!r} is not 'Full Name <address@domain>'")
    if not URL.match(url):
        problems.append(f"url {url!r} is not an https:// address")
    for what, value in (("maintainer", maintainer), ("url", url)):
        placeholder = PLACEHOLDER.search(value)
        if placeholder and not (allow_placeholders and placeholder[2].lower() == "example"):
            problems.append(f"{what} {value!r} is a placeholder")
    if problems:
        raise SystemExit(
            f"release: {'; '.join(problems)}: set them in {settings} "
            "(or NODEMANAGER_MAINTAINER / NODEMANAGER_URL)"
        )
    return Publisher(maintainer, url)
