"""The labels the agent writes on its ManagedNode, and parsing of custom labels.

The values are upstream nodemanager's (``pkg/common/labels DefaultLabels``), one per key:
``kubernetes.io/os`` is the os-release ``ID`` (``arch``, ``debian``, ``freebsd``) and
``kubernetes.io/arch`` the machine as ``uname -m`` prints it (``x86_64`` on Linux, ``amd64`` on
FreeBSD). A host moved from upstream's agent keeps the labels it had, so every ConfigSet selects
exactly the hosts it selected before and a template reading them renders the same text.
``nodemanager.io/os`` is not written: upstream never wrote it (its getting-started shows it,
its agent does not), so a ConfigSet selecting on it stayed inert and must stay inert.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from nodemanager.api.labels import key_problem, value_problem
from nodemanager.host.osinfo import OsRelease

MANAGED_KEYS = (
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
)
# Written by earlier versions of this agent; never written now, and left as it is on a node.
RETIRED_KEYS = ("nodemanager.io/os",)


def hostname() -> str:
    """This host's name, lowercased: ManagedNode names must be DNS-1123 subdomains."""
    return socket.gethostname().lower()


def parse_label_args(text: str) -> dict[str, str]:
    """Parse ``k=v,k2=v2`` (the --node-labels flag)."""
    labels: dict[str, str] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"label {item!r}: expected key=value")
        why = key_problem(key) or value_problem(value)
        if why:
            raise ValueError(why)
        labels[key] = value
    return labels


def node_labels(
    hostname: str, os_release: OsRelease, machine: str, custom: Mapping[str, str] = {}
) -> dict[str, str]:
    """The node's labels: upstream's three, one value each, then ``custom``."""
    for key in custom:
        if key in MANAGED_KEYS:
            raise ValueError(f"label {key!r} is managed by nodemanager and cannot be set by hand")
    return {
        "kubernetes.io/hostname": hostname,
        "kubernetes.io/os": os_release.id,
        "kubernetes.io/arch": machine,
        **custom,
    }
