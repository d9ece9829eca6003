"""Helpers for cluster tests. Waits are tests/waits.py's (re-exported here)."""

from __future__ import annotations

from tests.waits import eventually, stretch

__all__ = ["crds_established", "eventually", "stretch"]

UPSTREAM_KINDS = ("configsets", "managednodes")  # upstream has no NodePool


def crds_established(api, kinds=(*UPSTREAM_KINDS, "nodepools")) -> bool:
    """The project's CRDs of these kinds are Established (an ApiextensionsV1Api)."""
    for name in (f"{kind}.common.nodemanager" for kind in kinds):
        crd = api.read_custom_resource_definition(name)
        conds = {c.type: c.status for c in crd.status.conditions or []}
        assert conds.get("Established") == "True", name
    return True
