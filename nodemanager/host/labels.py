"""The labels the agent writes on its ManagedNode, and parsing of custom labels."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from nodemanager.api.labels import key_problem, value_problem
from nodemanager.host.osinfo import OsRelease

MANAGED_KEYS = (
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "nodemanager.io/os",
)


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
    hostname: str, os_release: OsRelease, arch: str, system: str, custom: Mapping[str, str] = {}
) -> dict[str, str]:
    for key in custom:
        if key in MANAGED_KEYS:
            raise ValueError(f"label {key!r} is managed by nodemanager and cannot be set by hand")
    return {
        "kubernetes.io/hostname": hostname,
        "kubernetes.io/os": system,
        "kubernetes.io/arch": arch,
        "nodemanager.io/os": os_release.id,
        **custom,
    }
