"""The labels the agent writes on its ManagedNode, and parsing of custom labels."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping

from nodemanager.host.osinfo import OsRelease

MANAGED_KEYS = (
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "nodemanager.io/os",
)
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def hostname() -> str:
    """This host's name, lowercased: ManagedNode names must be DNS-1123 subdomains."""
    return socket.gethostname().lower()


def check_key(key: str) -> None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        raise ValueError(f"label {key!r}: prefix must be a DNS subdomain")
    if len(name) > 63 or not _NAME.match(name):
        raise ValueError(
            f"label {key!r}: name must be 63 characters or less, alphanumerics with -_. inside"
        )


def check_value(key: str, value: str) -> None:
    if value and (len(value) > 63 or not _NAME.match(value)):
        raise ValueError(
            f"label {key!r}: value {value!r} must be 63 characters or less, "
            "alphanumerics with -_. inside"
        )


def parse_label_args(text: str) -> dict[str, str]:
    """Parse ``k=v,k2=v2`` (the --node-labels flag)."""
    labels: dict[str, str] = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"label {item!r}: expected key=value")
        check_key(key)
        check_value(key, value)
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
