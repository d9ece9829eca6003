"""This host's observed state as ManagedNode status fields. A collector that fails yields empty
data and a warning: one broken tool must not stop the agent from reporting the rest."""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable
from typing import Any

from nodemanager.host.interfaces import interfaces
from nodemanager.host.osinfo import read_os_release
from nodemanager.host.sshkeys import ssh_host_keys
from nodemanager.host.wireguard import wireguard

log = logging.getLogger(__name__)


def _safe(name: str, collect: Callable[[], Any], empty: Any) -> Any:
    try:
        return collect()
    except Exception as e:
        log.warning("could not observe %s: %s", name, e)
        return empty


def observe(ssh_dir: str = "/etc/ssh") -> dict[str, Any]:
    release = _safe("os-release", read_os_release, None)
    return {
        "release": platform.release(),  # uname -r, as upstream
        "osPrettyName": (release.pretty_name or f"{release.id} {release.version_id}".strip())
        if release
        else "",
        "interfaces": _safe("interfaces", interfaces, {}),
        "sshHostKeys": _safe("ssh host keys", lambda: ssh_host_keys(ssh_dir), []),
        "wireGuard": _safe("wireguard", wireguard, []),
    }
