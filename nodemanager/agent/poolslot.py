"""The pool's disruption budget, agent side: an OS upgrade or a lock_group restart waits for a
slot the controller grants.

The controller is the one place that counts a pool's disruptions: staged ConfigSet revisions
it admits itself, and these. So a node whose ManagedNode has ``spec.pool`` (the controller
writes it) asks for a slot by writing ``status.disruption`` ``{id, reason, since}`` and waits
until ``spec.disruptionGranted`` (a field nodes cannot write) names that id; only then does it
take the group Lease as before. The slot comes first and the Leases after, in that order
everywhere, so a node holding a group Lease never waits for the pool. When the last user gives
its slot back the request is removed and the controller frees the slot. Without ``spec.pool``
(no controller, or an older one) only the group Leases count, as upstream.

One ``PoolSlots`` per agent: the upgrade and the reconcile share one request (one field), each
through its own ``Locker`` view (``slots.locker("OS upgrade")``), which is also its holder of
the group Leases (agent/sharedlease.py: a Lease both hold is given back by the last). The
request is decided under a lock and written after it, by one caller at a time and always the
newest, so a slow API call holds no other caller and a give-back on the wire never removes a
request asked for meanwhile.

A request found in status after a restart (the reboot of an upgrade, a crash) is this agent's
own only if its id is the one the agent recorded in its state dir before writing it: that one
is kept (its grant holds across the reboot) or removed when nobody waits for it. Any other
request (an operator's, written by hand) is never adopted or removed: the agent cannot tell
whether someone still needs it. Ids, not clocks: a host's clock after a reboot may be wrong.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nodemanager.agent.grouplocks import Locker
from nodemanager.agent.sharedlease import SharedLeases
from nodemanager.fsutil import write_atomic

log = logging.getLogger(__name__)
POOL_FIELD, GRANT_FIELD, REQUEST_FIELD = "pool", "disruptionGranted", "disruption"


class PoolSlots:
    def __init__(
        self,
        inner: Locker,
        node: Callable[[], Mapping[str, Any] | None],
        write: Callable[[Mapping[str, Any]], object],
        record: Path,
    ) -> None:
        """``inner``: the group Leases (kube/locks.py), shared by this agent's holders;
        ``node``: this node's ManagedNode as last seen; ``write``: merge-patch its status;
        ``record``: the file keeping the id of the last request this agent wrote."""
        self.leases, self.node, self.write = SharedLeases(inner), node, write
        self.record = record
        self._lock = threading.Lock()  # guards the fields below; never held over a write
        self._wanted: dict[tuple[str, str], None] = {}  # (reason, name), in the order asked
        self._request = ""  # the id of the request this process wrote
        self._tidied = False
        # The request as status should say it (None: no request), numbered by each change,
        # and the number last written. One caller at a time writes (``_writing``), always the
        # newest, so writes land in order and an older one never overtakes a newer one.
        self._status: Mapping[str, Any] | None = None
        self._changes = self._written = 0
        self._writing = False

    def locker(self, reason: str) -> Locker:
        return _View(self, reason)

    def _me(self) -> Mapping[str, Any]:
        return self.node() or {}

    def acquire(self, reason: str, name: str, duration_seconds: int) -> str | None:
        me = self._me()
        spec = me.get("spec") or {}
        if POOL_FIELD in spec:
            with self._lock:
                self._wanted[(reason, name)] = None
                if not self._request:
                    self._request = self._adopt(me) or self._new_id()
                    what = f"{reason} {name}".strip()
                    self._change({"id": self._request, "reason": what, "since": _now()})
                    log.info("asked pool %s for a disruption slot (%s)", spec[POOL_FIELD], what)
                request = self._request
            self._flush()
            if spec.get(GRANT_FIELD) != request:
                return f"the budget of pool {spec[POOL_FIELD] or '(selected by two pools)'}"
        if not name:
            return None  # a slot only: no group Lease to take
        return self.leases.try_acquire(reason, name, duration_seconds)

    def _new_id(self) -> str:
        """A fresh request id, recorded before it is written (so a crash between the two
        leaves nothing in status this agent would not recognise as its own)."""
        request = uuid.uuid4().hex[:16]
        write_atomic(self.record, request.encode(), mode=0o600)
        return request

    def _adopt(self, me: Mapping[str, Any]) -> str:
        """The id of the request in status if this agent wrote it before a restart (the
        reboot of an upgrade, a crash), else "" (none, or someone else's)."""
        found = (me.get("status") or {}).get(REQUEST_FIELD)
        request = str(found.get("id") or "") if isinstance(found, Mapping) else ""
        try:
            recorded = self.record.read_text().strip()
        except OSError:
            return ""
        return request if request and request == recorded else ""

    def release(self, reason: str, name: str) -> None:
        if name:
            self.leases.release(reason, name)
        with self._lock:
            self._wanted.pop((reason, name), None)
            if not self._wanted and (self._request or self._adopt(self._me())):
                self._request = ""
                self._change(None)
                log.info("giving the disruption slot back")
        self._flush()

    def _change(self, status: Mapping[str, Any] | None) -> None:
        """Record what status should say now (called holding ``_lock``)."""
        self._status = status
        self._changes += 1

    def _flush(self) -> None:
        """Write the newest request until status says it, unless another caller is writing:
        that one writes ours after its own. A failed write raises here and is tried again by
        the next call (the waits poll, the reconcile and the upgrade check come back)."""
        with self._lock:
            if self._writing:
                return
            self._writing = True
        try:
            while True:
                with self._lock:
                    if self._written == self._changes:
                        self._writing = False
                        return
                    number, status = self._changes, self._status
                self.write({REQUEST_FIELD: status})
                with self._lock:
                    self._written = number
        except BaseException:
            with self._lock:
                self._writing = False
            raise

    def tidy(self) -> None:
        """Once, when this node's ManagedNode is first known: remove this agent's own request
        that nobody in this process waits for (left by a crash), since a slot granted to it
        would be held for nothing. Only once: later requests are this process's own."""
        me = self.node()
        if self._tidied or not me:
            return
        self._tidied = True
        with self._lock:
            if self._wanted or not self._adopt(me):
                return
            self._request = ""
            self._change(None)
        log.info("removing a disruption request left by an earlier run")
        self._flush()


class _View:
    def __init__(self, slots: PoolSlots, reason: str) -> None:
        self.slots, self.reason = slots, reason

    def try_acquire(self, name: str, duration_seconds: int = 300) -> str | None:
        return self.slots.acquire(self.reason, name, duration_seconds)

    def release(self, name: str) -> None:
        self.slots.release(self.reason, name)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
