"""Polling for cluster tests: wait for a condition, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    check: Callable[[], T], timeout: float = 30, interval: float = 0.1, message: str = ""
) -> T:
    """Call ``check`` until it returns a truthy value without raising AssertionError; return it."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except AssertionError as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s: {message or check}") from last
        time.sleep(interval)


UPSTREAM_KINDS = ("configsets", "managednodes")  # upstream has no NodePool


def crds_established(api, kinds=(*UPSTREAM_KINDS, "nodepools")) -> bool:
    """The project's CRDs of these kinds are Established (an ApiextensionsV1Api)."""
    for name in (f"{kind}.common.nodemanager" for kind in kinds):
        crd = api.read_custom_resource_definition(name)
        conds = {c.type: c.status for c in crd.status.conditions or []}
        assert conds.get("Established") == "True", name
    return True
