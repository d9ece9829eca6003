"""Kubernetes-shaped conditions whose lastTransitionTime only moves when the status does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodemanager.api.nodereport import set_condition


def condition(
    previous: Mapping[str, Mapping[str, Any]],
    type_: str,
    status: bool | str,
    reason: str,
    message: str,
    generation: int,
    now: str,
) -> dict[str, Any]:
    """One condition; ``previous`` maps type -> the condition last written (carries the time)."""
    text = status if isinstance(status, str) else ("True" if status else "False")
    new = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message[:2048],
        "observedGeneration": generation,
    }
    return set_condition([], new, now, previous=previous.values())[0]


def by_type(conditions: Iterable[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    return {c["type"]: c for c in conditions or () if "type" in c}
