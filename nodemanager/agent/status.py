"""The ManagedNode status the agent wants, computed from one reconcile's outcome (pure).

Condition transition times and ConfigSet ``lastApplied`` times carry over from the previous
status when nothing changed, so computing the same outcome twice gives the same status and the
agent writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodemanager.api.nodestatus import printable, within_bounds
from nodemanager.executor.summary import ConfigSetResult


def _condition(
    previous: Mapping[str, dict[str, Any]],
    type_: str,
    ok: bool,
    reason: str,
    message: str,
    generation: int,
    now: str,
) -> dict[str, Any]:
    status = "True" if ok else "False"
    prior = previous.get(type_)
    since = prior["lastTransitionTime"] if prior and prior.get("status") == status else now
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message[:2048],
        "observedGeneration": generation,
        "lastTransitionTime": since,
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
    entries = []
    for o in sorted(outcomes, key=lambda o: o.name):
        entry: dict[str, Any] = {
            "name": o.name,
            "resourceVersion": o.resource_version,
            "generation": o.generation,
        }
        if o.last_applied:
            entry["lastApplied"] = o.last_applied
        entry["error"] = "; ".join(o.errors)
        if o.conflicts:
            entry["conflicts"] = sorted(o.conflicts)
        entries.append(entry)

    failed = [o for o in outcomes if o.errors]
    conflicted = sorted({c for o in outcomes for c in o.conflicts})
    prior = {c["type"]: c for c in previous.get("conditions") or []}
    if failed:
        applied_msg = "; ".join(f"{o.name}: {'; '.join(o.errors)}" for o in failed)
    else:
        applied_msg = (
            f"{len(outcomes)} ConfigSets applied" if outcomes else "no ConfigSet matches this node"
        )
    conditions = [
        # Ready says the host matches its ConfigSets: a conflicted resource is applied from
        # neither declaration, so the host does not, even when everything else applied.
        _condition(
            prior,
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
            now,
        ),
        _condition(
            prior,
            "Applied",
            not failed,
            "Applied" if not failed else "ApplyFailed",
            applied_msg,
            generation,
            now,
        ),
        _condition(
            prior,
            "Degraded",
            bool(failed),
            "ApplyFailed" if failed else "AsExpected",
            applied_msg if failed else "",
            generation,
            now,
        ),
        _condition(
            prior,
            "Conflicted",
            bool(conflicted),
            "ConflictingDeclarations" if conflicted else "NoConflicts",
            ", ".join(conflicted),
            generation,
            now,
        ),
    ]
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


def differs(wanted: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether writing ``wanted`` would change the stored status (only the keys the agent owns)."""
    return any(current.get(k) != v for k, v in wanted.items())
