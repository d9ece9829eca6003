"""The agent checks that a node is still restricted: at start and with each drift check.

Without the ValidatingAdmissionPolicy (or its binding) a node's account silently gains
self-labelling and spec writes. Nothing else would notice, so the agent tries a forbidden write
as a server-side dry-run (kube/policycheck.py). When it is accepted, the agent sets the
``NodeRestricted`` condition to False, records a Warning Event ``AdmissionPolicyMissing`` once
per change, and sets ``nodemanager_admission_policy_enforced`` to 0 (the alert
``NodeManagerAdmissionPolicyMissing`` fires on it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Gauge

log = logging.getLogger(__name__)
CONDITION = "NodeRestricted"
EVENT_REASON = "AdmissionPolicyMissing"
_WORDS = {
    True: ("True", "PolicyEnforced", "the admission policy refused a forbidden write (dry-run)"),
    False: (
        "False",
        "PolicyMissing",
        "the API server accepted a forbidden write (dry-run): the admission policy "
        "nodemanager-node-restriction or its binding is missing; apply `nodemanager rbac --shared`",
    ),
    None: (
        "Unknown",
        "NotChecked",
        "the admission policy has not been checked yet, or the agent does not run with a node "
        "account",
    ),
}


class PolicySelfTest:
    def __init__(
        self,
        allowed: Callable[[], bool | None],
        report: Callable[[str, str], None],
        gauge: Gauge,
    ):
        self.allowed, self.report, self.gauge = allowed, report, gauge
        self.enforced: bool | None = None

    def run(self) -> None:
        answer = self.allowed()
        if answer is None:
            return  # inconclusive: keep the last answer
        enforced = not answer
        if enforced == self.enforced:
            return
        self.enforced = enforced
        self.gauge.set(1 if enforced else 0)
        if not enforced:
            message = _WORDS[False][2]
            log.warning("%s", message)
            try:
                self.report(EVENT_REASON, message)
            except Exception as e:
                log.warning("could not report %s: %s", EVENT_REASON, e)

    def with_condition(
        self, status: Mapping[str, Any], previous: Mapping[str, Any], now: str
    ) -> dict[str, Any]:
        """``status`` with the NodeRestricted condition added (transition time carried over)."""
        state, reason, message = _WORDS[self.enforced]
        prior = next(
            (c for c in previous.get("conditions") or [] if c.get("type") == CONDITION), None
        )
        since = prior["lastTransitionTime"] if prior and prior.get("status") == state else now
        condition = {
            "type": CONDITION,
            "status": state,
            "reason": reason,
            "message": message,
            "lastTransitionTime": since,
        }
        others = [c for c in status.get("conditions") or [] if c.get("type") != CONDITION]
        return {**status, "conditions": [*others, condition]}
