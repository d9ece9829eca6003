"""Kubernetes-shaped conditions whose lastTransitionTime only moves when the status does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


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
    prior = previous.get(type_)
    since = prior.get("lastTransitionTime") if prior and prior.get("status") == text else None
    return {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message[:2048],
        "observedGeneration": generation,
        "lastTransitionTime": since or now,
    }


def by_type(conditions: Iterable[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    return {c["type"]: c for c in conditions or () if "type" in c}
