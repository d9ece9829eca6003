"""What OS and architecture this host runs, in the words Kubernetes labels use."""

from __future__ import annotations

import platform
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class OsRelease:
    id: str
    version_id: str = ""
    pretty_name: str = ""
    id_like: tuple[str, ...] = ()


def parse_os_release(text: str) -> OsRelease:
    """Parse os-release(5): KEY=value lines, shell-style quoting and escapes, # comments."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, raw = line.partition("=")
        try:
            words = shlex.split(raw, comments=False, posix=True)
        except ValueError:
            continue
        values[key.strip()] = words[0] if words else ""
    return OsRelease(
        id=values.get("ID", "linux").lower(),
        version_id=values.get("VERSION_ID", ""),
        pretty_name=values.get("PRETTY_NAME", ""),
        id_like=tuple(values.get("ID_LIKE", "").lower().split()),
    )


def read_os_release(root: str = "/") -> OsRelease:
    for rel in ("etc/os-release", "usr/lib/os-release"):
        path = Path(root) / rel
        if path.exists():
            return parse_os_release(path.read_text())
    if platform.system() == "FreeBSD":
        return OsRelease("freebsd", platform.release(), f"FreeBSD {platform.release()}")
    return OsRelease(platform.system().lower(), platform.release(), platform.platform())


_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "arm": "arm",
}


def kube_arch(machine: str | None = None) -> str:
    machine = (machine or platform.machine()).lower()
    return _ARCH.get(machine, machine)


def kube_os(system: str | None = None) -> str:
    return (system or platform.system()).lower()
