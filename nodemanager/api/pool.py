"""NodePool: a set of nodes sharing one disruption budget (MachineConfigPool is the model).

Every ManagedNode is in exactly one pool: the pool whose ``spec.nodeSelector`` matches it, else
the default pool (named ``default``, kept by the controller, its selector ignored: it holds the
rest). A node two pools match is in neither: it is held (nothing new admitted) until an
administrator resolves it. ``maxUnavailable`` (api/maxunavailable.py: a count of at least 1,
or "N%" of the pool's nodes, 1-100, rounded down, never below 1) bounds how many of the pool's
nodes are being disrupted at once: a new revision of any staged ConfigSet, an OS upgrade, a
``lock_group`` restart. ``spec.fencing`` is the fencing of the pool's nodes that have none of
their own (api/fencing.py). ``spec.stageAll`` stages the ConfigSets without ``spec.rollout`` on
the pool's nodes too (api/revisions.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodemanager.api.errors import FieldError, InvalidObject
from nodemanager.api.fencing import MAX_TIMEOUT, MIN_TIMEOUT, Fencing
from nodemanager.api.labels import LabelSelector, selector
from nodemanager.api.maxunavailable import budget, problem
from nodemanager.api.reader import Reader

KIND = "NodePool"
# The one ManagedNode condition the controller owns besides Ready=Unknown: True while two pools
# select the node, naming both. The agent carries it over when it writes its conditions.
CONFLICT_CONDITION = "PoolConflict"
DEFAULT_POOL = "default"
DEFAULT_PROGRESS_DEADLINE = 600


@dataclass(frozen=True)
class NodePool:
    name: str
    selector: LabelSelector | None = None  # None: the default pool (or a pool matching nothing)
    max_unavailable: int | str = 1
    paused: bool = False
    min_ready_seconds: int = 0
    progress_deadline_seconds: int = DEFAULT_PROGRESS_DEADLINE
    generation: int = 0
    fencing: Fencing = Fencing()  # off: the pool leaves fencing to each node
    stage_all: bool = False  # ConfigSets without spec.rollout are staged on its nodes too

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_POOL

    def budget(self, nodes: int) -> int:
        """maxUnavailable as a node count: a percentage of ``nodes`` rounds down, never below 1
        (a pool that may change no node would never finish)."""
        return budget(self.max_unavailable, nodes)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NodePool:
        """Parse one NodePool object; raise InvalidObject naming every bad field."""
        errors: list[FieldError] = []
        root = Reader(raw, "", errors)
        meta, spec = root.child("metadata"), root.child("spec")
        name = meta.string("name", required=True) or ""
        value = (raw.get("spec") or {}).get("maxUnavailable", 1)
        why = problem(value)
        if why is not None:
            spec.error("maxUnavailable", why)
            value = 1
        pool = cls(
            name=name,
            selector=selector(spec.child("nodeSelector")) if spec.has("nodeSelector") else None,
            max_unavailable=value,
            paused=spec.boolean("paused", default=False),
            min_ready_seconds=spec.integer("minReadySeconds") or 0,
            progress_deadline_seconds=spec.integer("progressDeadlineSeconds")
            or DEFAULT_PROGRESS_DEADLINE,
            generation=meta.integer("generation") or 0,
            fencing=_fencing(spec.child("fencing")) if spec.has("fencing") else Fencing(),
            stage_all=spec.boolean("stageAll", default=False),
        )
        if errors:
            raise InvalidObject(KIND, name, errors)
        return pool


def _fencing(spec: Reader) -> Fencing:
    enabled = spec.boolean("enabled", default=None)
    if enabled is None:
        spec.error("enabled", "is required")
    timeout = spec.integer("timeoutSeconds")
    if timeout is not None and not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:
        spec.error("timeoutSeconds", f"must be between {MIN_TIMEOUT} and {MAX_TIMEOUT}")
    raw = {"enabled": enabled, **({"timeoutSeconds": timeout} if timeout is not None else {})}
    return Fencing.parse(raw)


def default_pool(namespace: str) -> dict[str, Any]:
    """The default pool the controller creates when there is none: maxUnavailable 1, as MCO's."""
    return {
        "apiVersion": "common.nodemanager/v1",
        "kind": KIND,
        "metadata": {"name": DEFAULT_POOL, "namespace": namespace},
        "spec": {"maxUnavailable": 1},
    }
