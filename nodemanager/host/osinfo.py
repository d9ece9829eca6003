"""What OS and architecture this host runs, in the words Kubernetes labels use."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class OsRelease:
    id: str
    version_id: str = ""
    pretty_name: str = ""
    id_like: tuple[str, ...] = ()


def from_fields(values: Mapping[str, str]) -> OsRelease:
    """An OsRelease from os-release(5) fields (as ``platform.freedesktop_os_release`` gives)."""
    return OsRelease(
        id=values.get("ID", "linux").lower(),
        version_id=values.get("VERSION_ID", ""),
        pretty_name=values.get("PRETTY_NAME", ""),
        id_like=tuple(values.get("ID_LIKE", "").lower().split()),
    )


def read_os_release() -> OsRelease:
    """This host's os-release; without one (FreeBSD before 13), what ``platform`` says."""
    try:
        return from_fields(platform.freedesktop_os_release())
    except OSError:
        pass
    if platform.system() == "FreeBSD":
        return OsRelease("freebsd", platform.release(), f"FreeBSD {platform.release()}")
    return OsRelease(platform.system().lower(), platform.release(), platform.platform())


def machine() -> str:
    """``uname -m``, as upstream's agent labels ``kubernetes.io/arch``."""
    return platform.machine()
