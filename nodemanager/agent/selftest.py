"""The agent checks that a node is still restricted: at start and with each drift check.

Without a ValidatingAdmissionPolicy (or its binding) a node's account silently gains
self-labelling, spec writes, Events about others, other nodes' Leases or unbound tokens. Nothing
else would notice, so the agent tries one forbidden write per policy as a server-side dry-run
(kube/policycheck.py). When it is accepted, the agent sets the
``NodeRestricted`` condition to False, records a Warning Event ``AdmissionPolicyMissing`` once
per change, and sets ``nodemanager_admission_policy_enforced`` to 0 (the alert
``NodeManagerAdmissionPolicyMissing`` fires on it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import Gauge

from nodemanager.api.nodereport import set_condition

log = logging.getLogger(__name__)
CONDITION = "NodeRestricted"
EVENT_REASON = "AdmissionPolicyMissing"
_WORDS = {
    True: ("True", "PolicyEnforced", "the admission policy refused a forbidden write (dry-run)"),
    False: (
        "False",
        "PolicyMissing",
        "the API server accepted a forbidden write (dry-run): the admission policy {} or its "
        "binding is missing; apply `nodemanager rbac --shared`",
    ),
    None: (
        "Unknown",
        "NotChecked",
        "the admission policy has not been checked yet, or the agent does not run with a node "
        "account",
    ),
}


class PolicySelfTest:
    """``missing()``: the policies whose forbidden write was accepted, None if inconclusive."""

    def __init__(
        self,
        missing: Callable[[], list[str] | None],
        report: Callable[[str, str], None],
        gauge: Gauge,
    ):
        self.missing, self.report, self.gauge = missing, report, gauge
        self.enforced: bool | None = None
        self.missing_now: tuple[str, ...] = ()

    def run(self) -> None:
        answer = self.missing()
        if answer is None:
            return  # inconclusive: keep the last answer
        if self.enforced is not None and tuple(answer) == self.missing_now:
            return
        self.missing_now = tuple(answer)
        self.enforced = not answer
        self.gauge.set(1 if self.enforced else 0)
        if not self.enforced:
            message = self._message()
            log.warning("%s", message)
            try:
                self.report(EVENT_REASON, message)
            except Exception as e:
                log.warning("could not report %s: %s", EVENT_REASON, e)

    def _message(self) -> str:
        return _WORDS[self.enforced][2].format(", ".join(self.missing_now))

    def with_condition(
        self, status: Mapping[str, Any], previous: Mapping[str, Any], now: str
    ) -> dict[str, Any]:
        """``status`` with the NodeRestricted condition added (transition time carried over)."""
        state, reason, _ = _WORDS[self.enforced]
        message = self._message()
        condition = {"type": CONDITION, "status": state, "reason": reason, "message": message}
        conditions = set_condition(
            status.get("conditions"), condition, now, previous=previous.get("conditions")
        )
        return {**status, "conditions": conditions}
