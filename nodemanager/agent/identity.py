"""Who this host is, computed once for every command: name, the labels it manages, its family.

The agent and local mode (``render``, ``apply``) both call ``identify``, so a host selects the
same ConfigSets and gets the same playbook either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodemanager.host import labels as host_labels
from nodemanager.host import osinfo
from nodemanager.playbook import platforms


@dataclass(frozen=True)
class NodeIdentity:
    """Who this host is for selection: its name, managed labels and platform family."""

    name: str
    labels: Mapping[str, str]
    family: str


def identify(
    hostname: str | None = None, os_id: str | None = None, custom: Mapping[str, str] | None = None
) -> NodeIdentity:
    """This host's identity; ``os_id`` pretends another OS (``render --os arch`` on Debian).

    ``kubernetes.io/os`` is the os-release ID (upstream's value), so pretending an OS labels
    the node as that OS's agent would."""
    release = osinfo.read_os_release()
    if os_id:
        release = osinfo.OsRelease(id=os_id, version_id="", pretty_name=os_id, id_like=())
    name = hostname or host_labels.hostname()
    labels = host_labels.node_labels(name, release, osinfo.machine(), custom or {})
    family = platforms.family_or_unsupported(release.id, release.id_like)
    return NodeIdentity(name, labels, family)
