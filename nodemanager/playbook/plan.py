"""A node's plan: its typed steps, the one source of the playbook Ansible runs.

Every task is named ``<configsets> | <kind> <key>`` and each step carries its origin (resource,
ConfigSets, field), so the executor maps events back without parsing names. The playbook is
rendered from the steps (render.py) whenever it is needed, never kept beside them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from nodemanager.desired.merge import DesiredState
from nodemanager.playbook import render
from nodemanager.playbook.dump import LongUnsafe
from nodemanager.playbook.steps import Batch, Origin, Step

TaskOrigin = Origin  # the name the executor and agent know


@dataclass(frozen=True)
class Plan:
    """The steps of one node's play and where each came from."""

    steps: tuple[Step, ...]  # the tasks in play order, then the handlers in handler order
    desired: DesiredState
    family: str
    node: str
    errors: Mapping[str, str] = field(
        default_factory=dict
    )  # resource id -> why it has no step here
    # The part the fast path leaves to Ansible: topics its native changes notified (a first
    # task notifies them), and whether the handlers run as tasks, in order (no task is left to
    # notify them).
    notified: tuple[str, ...] = ()
    forced: bool = False
    # Package steps the fast path hands to their module as one list each (render.playbook
    # renders each as a block: the list's task, its steps' own tasks as the rescue).
    batches: tuple[Batch, ...] = ()

    def tasks(self) -> list[Step]:
        """The steps of the play's tasks, in play order."""
        return [s for s in self.steps if not s.origin.handler]

    def handlers(self) -> list[Step]:
        """The steps of the play's handlers, in handler order (the order they run in)."""
        return [s for s in self.steps if s.origin.handler]

    @functools.cached_property
    def origins(self) -> Mapping[str, TaskOrigin]:
        """Where each task of the playbook came from, by task name (reporters and guards
        included)."""
        out: dict[str, TaskOrigin] = {}
        for s in self.steps:
            out[s.task] = s.origin
            if s.reported_by:
                out[s.reported_by] = s.origin
            if s.kind in render.GUARDED:
                out[render.GUARD_STAT.format(task=s.task)] = s.origin
                out[render.GUARD.format(task=s.task)] = s.origin
        for b in self.batches:
            out[b.task] = b.steps[0].origin
        return out

    @property
    def playbook(self) -> list[dict[str, Any]]:
        """The playbook the agent's Ansible runs, rendered from the steps."""
        return render.playbook(self)

    @property
    def exported(self) -> list[dict[str, Any]]:
        """The playbook `render` prints: the agent's without what only ansible-runner's
        censored events need (render.reporter)."""
        return render.playbook(self, agent=False)

    @property
    def has_secrets(self) -> bool:
        return any(s.origin.secret for s in self.steps)

    def resource_digests(self) -> dict[str, str]:
        """A digest per resource of every task and handler it contributes: what changed is
        what needs to run."""
        hashes: dict[str, Any] = {}
        for play in self.playbook:
            for task in render.leaves([*play["tasks"], *play.get("handlers", [])]):
                origin = self.origins[task["name"]]
                # JSON, not YAML: same content, a hundred times cheaper on the idle path. A large
                # value (file content) is hashed where it stands: its JSON text, joined and
                # encoded, would cost three more copies of it (+120 MB for 50 MB of content).
                text = json.dumps(_digested(task), sort_keys=True)
                hashes.setdefault(origin.resource, hashlib.sha256()).update(text.encode())
        return {rid: h.hexdigest() for rid, h in hashes.items()}

    def only(self, resources: set[str]) -> Plan:
        """The same plan with only the steps of ``resources``; every handler stays (handlers run
        only when notified, so a subscribed service restarts only when its file changed)."""
        steps = tuple(s for s in self.steps if s.origin.handler or s.origin.resource in resources)
        return replace(self, steps=steps)


# Strings longer than this go into a resource digest as their own SHA-256.
_DIGEST_WHOLE = 1 << 16
_CHUNK = 1 << 20


def _digested(value: Any) -> Any:
    """``value`` with every long string replaced by a tagged SHA-256 of its UTF-8 bytes,
    encoded a chunk at a time."""
    if isinstance(value, LongUnsafe):
        value = value.text  # the same digest as the text it carries
    if isinstance(value, str) and len(value) > _DIGEST_WHOLE:
        h = hashlib.sha256()
        for at in range(0, len(value), _CHUNK):
            h.update(value[at : at + _CHUNK].encode())
        return {"nodemanager/sha256": h.hexdigest()}
    if isinstance(value, dict):
        return {k: _digested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_digested(v) for v in value]
    return value
