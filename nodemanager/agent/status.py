"""The ManagedNode status the agent wants, computed from one reconcile's outcome (pure).

Condition transition times and ConfigSet ``lastApplied`` times carry over from the previous
status when nothing changed, so computing the same outcome twice gives the same status and the
agent writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodemanager.api.nodereport import ConfigSetEntry, set_condition
from nodemanager.api.nodestatus import printable, within_bounds
from nodemanager.api.pool import CONFLICT_CONDITION
from nodemanager.executor.summary import ConfigSetResult


def _condition(type_: str, ok: bool, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message[:2048],
        "observedGeneration": generation,
    }


def compute(
    *,
    observed: Mapping[str, Any],
    agent_version: str,
    outcomes: list[ConfigSetResult],
    previous: Mapping[str, Any],
    generation: int,
    now: str,
) -> dict[str, Any]:
    entries = [
        ConfigSetEntry(
            o.name,
            o.generation,
            error="; ".join(o.errors),
            last_applied=o.last_applied,
            conflicts=tuple(sorted(o.conflicts)),
            resource_version=o.resource_version,
        ).to_raw()
        for o in sorted(outcomes, key=lambda o: o.name)
    ]

    failed = [o for o in outcomes if o.errors]
    conflicted = sorted({c for o in outcomes for c in o.conflicts})
    if failed:
        applied_msg = "; ".join(f"{o.name}: {'; '.join(o.errors)}" for o in failed)
    else:
        applied_msg = (
            f"{len(outcomes)} ConfigSets applied" if outcomes else "no ConfigSet matches this node"
        )
    wanted = [
        # Ready says the host matches its ConfigSets: a conflicted resource is applied from
        # neither declaration, so the host does not, even when everything else applied.
        _condition(
            "Ready",
            not failed and not conflicted,
            "ApplyFailed" if failed else ("Conflicted" if conflicted else "Reconciled"),
            applied_msg
            if failed
            else (
                f"applied from neither declaration: {', '.join(conflicted)}"
                if conflicted
                else "agent is running and the host matches its ConfigSets"
            ),
            generation,
        ),
        _condition(
            "Applied",
            not failed,
            "Applied" if not failed else "ApplyFailed",
            applied_msg,
            generation,
        ),
        _condition(
            "Degraded",
            bool(failed),
            "ApplyFailed" if failed else "AsExpected",
            applied_msg if failed else "",
            generation,
        ),
        _condition(
            "Conflicted",
            bool(conflicted),
            "ConflictingDeclarations" if conflicted else "NoConflicts",
            ", ".join(conflicted),
            generation,
        ),
    ]
    # The controller's PoolConflict (api/pool.py) is not the agent's to drop.
    conditions: list[dict[str, Any]] = [
        dict(c) for c in previous.get("conditions") or () if c.get("type") == CONFLICT_CONDITION
    ]
    for new in wanted:
        conditions = set_condition(conditions, new, now, previous=previous.get("conditions"))
    # printable: messages (Ansible's span lines) must pass the schema's no-control-character rule.
    status: dict[str, Any] = within_bounds(
        printable(
            {
                **observed,
                "agentVersion": agent_version,
                "observedGeneration": generation,
                "configsets": entries,
                "conditions": conditions,
            }
        )
    )
    return status


def changed(wanted: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that makes the stored status ``wanted``: only the keys whose stored value
    differs (a ``None`` removes a key that is there). A ConfigSet change then sends
    ``configsets`` alone instead of the host facts, pressure and conditions beside it: the API
    server's CPU per status write fell from 10.3 to 6.6 ms (bench/writes.py), and a fleet
    reports a change with 5,000 of them."""
    return {k: v for k, v in wanted.items() if current.get(k) != v}


def differs(wanted: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` would change the stored status (only the keys the agent owns)."""
    return bool(changed(wanted, current))
