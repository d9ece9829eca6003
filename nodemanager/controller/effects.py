"""What a reconcile asks the API server to do, as values, and the one place that does it.

A reconcile function (configsets.py, liveness.py, access.py) reads the informers' caches and
returns an ``Outcome``: the writes it wants (``Write``), the Events to record once they are
done, and when to look again (``requeue_after``). It never calls the API server itself, so it
can be tested against plain in-memory state. ``apply`` performs the writes in order and stops
at the first failure (a later write may depend on an earlier one: a revision before the
admissions to it); Events are recorded only when every write went through, so a failed write
that is retried never says its Event twice. controller-runtime's ``reconcileHandler`` and
kopf's ``Outcome`` are the models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodemanager.controller.events import Note
from nodemanager.kube.csr import Grant
from nodemanager.kube.errors import KUBE_ERRORS, KubeError, translate

_ERRORS: tuple[type[Exception], ...] = (KubeError, *KUBE_ERRORS)


class Fleet(Protocol):
    """The writes (and the one confirming read) effects make: kube/fleet.py's FleetClient."""

    def patch_configset_status(self, name: str, status: Mapping[str, Any]) -> None: ...
    def patch_node_conditions(
        self, name: str, resource_version: str, conditions: list[dict[str, Any]]
    ) -> None: ...
    def get_lease(self, name: str) -> dict[str, Any] | None: ...
    def put_role(self, role: dict[str, Any]) -> None: ...
    def create_binding(self, binding: dict[str, Any]) -> None: ...
    def put_binding(self, binding: dict[str, Any]) -> None: ...
    def delete_rbac(self, name: str) -> None: ...
    def create_revision(self, revision: dict[str, Any]) -> None: ...
    def renumber_revision(self, name: str, number: int) -> None: ...
    def delete_revision(self, name: str) -> None: ...
    def admit(self, node: str, field: str, configset: str, revision: str) -> None: ...
    def unadmit(self, node: str, fields: Sequence[str], configset: str) -> None: ...
    def mark_ready(
        self, node: str, field: str, configset: str, revision: str, since: str
    ) -> None: ...
    def fence(self, node: str, report: Callable[[str, str], None]) -> None: ...
    def may(self, user: str, groups: Sequence[str], grant: Grant, name: str) -> bool: ...
    def approve_csr(self, csr: Mapping[str, Any], reason: str, message: str) -> None: ...
    def delete_csr(self, name: str) -> None: ...
    def patch_node_spec(self, node: str, spec: Mapping[str, Any]) -> None: ...
    def create_pool(self, pool: dict[str, Any]) -> None: ...
    def patch_pool_status(self, name: str, status: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class Write:
    """One call of a ``Fleet`` method; ``what`` labels the writes metric."""

    what: str
    method: str
    args: tuple[Any, ...]

    def apply(self, fleet: Fleet) -> bool:
        getattr(fleet, self.method)(*self.args)
        return True


class Effect(Protocol):
    """A write (``Write``, or liveness.MarkUnknown with its confirming read)."""

    @property
    def what(self) -> str: ...

    def apply(self, fleet: Fleet) -> bool:
        """Do it; False when a fresh read showed it is not needed after all."""
        ...


@dataclass(frozen=True)
class Outcome:
    """What one reconcile of one object wants (nothing: the object is as it should be)."""

    effects: tuple[Effect, ...] = ()
    notes: tuple[Note, ...] = ()  # Events on ``involved``, recorded once the effects are done
    involved: Mapping[str, Any] | None = None  # the object reference the Events name
    requeue_after: float | None = None  # look again this soon though nothing changes


@dataclass
class Applied:
    done: list[Effect] = field(default_factory=list)
    # Not needed after all (a fresh read), or its object deleted since the cache saw it (404)
    skipped: list[Effect] = field(default_factory=list)
    error: KubeError | None = None


def apply(
    outcome: Outcome,
    fleet: Fleet,
    record: Callable[[Mapping[str, Any], Note], None] | None = None,
) -> Applied:
    """Perform ``outcome``'s writes in order, then record its Events; stop at the first error.

    A 404 skips that write quietly (its object was deleted since the cache saw it; the delete
    event follows). Any other error, a timeout included, is returned as a ``KubeError`` for
    the caller's per-object backoff."""
    result = Applied()
    for effect in outcome.effects:
        try:
            (result.done if effect.apply(fleet) else result.skipped).append(effect)
        except _ERRORS as e:  # no answer at all (a hung server) included
            error = translate(e)
            if error.status != 404:
                result.error = error
                return result
            result.skipped.append(effect)
    if record is not None and outcome.involved is not None:
        for note in outcome.notes:
            record(outcome.involved, note)
    return result


class Deferred:
    """The rollout writes of staging.py, collected as effects instead of sent (``Fleet``'s
    rollout half): the step computes as if they succeeded, ``apply`` sends them after."""

    def __init__(self) -> None:
        self.effects: list[Effect] = []

    def _add(self, what: str, method: str, *args: Any) -> None:
        self.effects.append(Write(what, method, args))

    def create_revision(self, revision: dict[str, Any]) -> None:
        self._add("revision", "create_revision", revision)

    def renumber_revision(self, name: str, number: int) -> None:
        self._add("revision", "renumber_revision", name, number)

    def delete_revision(self, name: str) -> None:
        self._add("revision_deleted", "delete_revision", name)

    def admit(self, node: str, field: str, configset: str, revision: str) -> None:
        self._add("admission", "admit", node, field, configset, revision)

    def unadmit(self, node: str, fields: Sequence[str], configset: str) -> None:
        self._add("admission_pruned", "unadmit", node, tuple(fields), configset)

    def mark_ready(self, node: str, field: str, configset: str, revision: str, since: str) -> None:
        self._add("ready_marked", "mark_ready", node, field, configset, revision, since)

    def mark_first_applied(self, node: str, since: str) -> None:
        # firstapplied.FIELD (that module imports this one)
        self._add("first_applied", "patch_node_spec", node, {"firstApplied": since})
