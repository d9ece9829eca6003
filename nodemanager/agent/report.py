"""Log lines that say what a reconcile did: which ConfigSet and resource changed (INFO) or
failed, and why (WARNING, so a WARNING filter sees every failure). A failed run used to log
only its duration.

Messages are the module's own (Ansible censors those of ``no_log`` tasks, which is how
Secret-fed files run); diffs are never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger(__name__)


def log_results(results: Iterable[Any]) -> None:
    """One line per task that changed the host (TaskResult). Failures are logged with their
    ConfigSet's outcome (``log_outcomes``), once."""
    for r in results:
        if r.status == "changed":
            log.info("ConfigSet %s: changed %s", ",".join(r.configsets) or "-", r.resource)


def log_outcomes(outcomes: Iterable[Any]) -> None:
    """One line per ConfigSet that ended with errors (ConfigSetResult): templates, invalid
    specs and conflicts never reach Ansible, so they have no task result."""
    for o in outcomes:
        for f in o.failures:
            log.warning(
                "ConfigSet %s@%s: resource %s failed: %s",
                o.name,
                o.resource_version,
                f.resource or "(the run)",
                f.message,
                extra={"configset": o.name, "resource": f.resource},
            )
        for conflict in o.conflicts:
            log.warning("ConfigSet %s: conflict %s: applied from neither", o.name, conflict)
