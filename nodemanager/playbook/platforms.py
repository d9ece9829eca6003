"""Map an OS (os-release ID and ID_LIKE) to a platform family and load its task skeletons."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from nodemanager.playbook.errors import UnsupportedPlatform
from nodemanager.resources import data_path

TEMPLATES_DIR = Path(
    os.environ.get("NODEMANAGER_PLAYBOOK_TEMPLATES") or data_path("playbook_templates")
)

FAMILIES = {
    "arch": "arch",
    "archarm": "arch",
    "manjaro": "arch",
    "endeavouros": "arch",
    "alpine": "alpine",
    "freebsd": "freebsd",
    "debian": "debian",
    "ubuntu": "debian",
    "raspbian": "debian",
    "linuxmint": "debian",
    "fedora": "fedora",
    "rhel": "fedora",
    "centos": "fedora",
    "rocky": "fedora",
    "almalinux": "fedora",
}


def family(os_id: str, id_like: Iterable[str] = ()) -> str:
    """The platform family of an os-release ID, falling back to its ID_LIKE words."""
    for word in (os_id, *id_like):
        if word.lower() in FAMILIES:
            return FAMILIES[word.lower()]
    raise UnsupportedPlatform(os_id)


UNSUPPORTED = "unsupported:"


def family_or_unsupported(os_id: str, id_like: Iterable[str] = ()) -> str:
    """Like ``family``, but an OS of no known family (openSUSE, ...) is ``unsupported:<ID>``:
    files and executions need no package or service manager and still apply there; only
    packages and services are refused (see ``unsupported``)."""
    try:
        return family(os_id, id_like)
    except UnsupportedPlatform:
        return UNSUPPORTED + os_id


def unsupported(fam: str) -> str | None:
    """Why packages and services cannot be managed on ``fam``, or None when they can."""
    if not fam.startswith(UNSUPPORTED):
        return None
    return str(UnsupportedPlatform(fam.removeprefix(UNSUPPORTED)))


@functools.cache
def skeletons(kind: str) -> dict[str, Any]:
    """The skeletons of one resource kind (packages, files, services, executions), loaded once."""
    path = TEMPLATES_DIR / f"{kind}.yaml"
    try:
        table: dict[str, Any] = yaml.safe_load(path.read_text())
        return table
    except OSError as e:
        raise FileNotFoundError(f"playbook skeletons missing: {path} ({e.strerror})") from e


def for_family(kind: str, fam: str) -> dict[str, Any]:
    table = skeletons(kind)
    chosen: dict[str, Any] = table.get(fam) or table["default"]
    return chosen
