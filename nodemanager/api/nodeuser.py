"""The user a node's client certificate authenticates as, apart from api/nodecert.py: the
agent and the RBAC it is given name that user, and nodecert loads cryptography (8.6 MB of the
agent's RSS), which only a certificate's own code needs."""

from __future__ import annotations

USER_PREFIX = "nodemanager:node:"


def user_name(namespace: str, hostname: str) -> str:
    """The user a node's certificate authenticates as."""
    return f"{USER_PREFIX}{namespace}:{hostname}"
