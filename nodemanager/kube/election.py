"""Leader election through a coordination.k8s.io Lease, as client-go's leaderelection does.

A candidate takes the Lease when nobody holds it, or when the holder's record has not changed
for ``lease_duration`` seconds of *our* clock (the holder's timestamps are never compared with
our clock, so skew between hosts cannot hand the Lease to two replicas). Writes carry the
resourceVersion read, so two candidates racing for a free Lease cannot both win: one gets a
409. The leader renews every ``retry_period``; when it has not renewed for ``renew_deadline``
it must stop working (``lost`` fires) before another replica can take over.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.errors import translate

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        clients: ClientFactory,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ) -> None:
        self.clients, self.namespace, self.name, self.identity = clients, namespace, name, identity
        self.lease_duration, self.renew_deadline = lease_duration, renew_deadline
        self.retry_period = retry_period
        self.leading = threading.Event()
        self.renewed_at = 0.0  # monotonic time of the last successful acquire or renew
        self._lease: client.V1Lease | None = None
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen changing
        self._observed_at = 0.0

    def _api(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.clients.get())

    def try_acquire_or_renew(self) -> bool:
        """One election round; whether this replica holds the Lease afterwards."""
        api, stamp = self._api(), dt.datetime.now(dt.UTC)
        try:
            lease = api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise translate(e) from e
            spec = client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self.lease_duration),
                acquire_time=stamp,
                renew_time=stamp,
                lease_transitions=0,
            )
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace), spec=spec
            )
            try:
                self._lease = api.create_namespaced_lease(
                    self.namespace, body, field_manager=FIELD_MANAGER
                )
            except ApiException as e2:
                if e2.status == 409:
                    return False  # another replica created it first
                raise translate(e2) from e2
            return True
        spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity or ""
        record = (holder, str(spec.renew_time))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        if holder and holder != self.identity:
            if time.monotonic() - self._observed_at < self.lease_duration:
                return False  # held, and renewed within a lease duration as we measure it
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.acquire_time = stamp
        elif not holder:  # released by its last holder
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
            spec.acquire_time = stamp
        spec.holder_identity = self.identity
        spec.renew_time = stamp
        spec.lease_duration_seconds = int(self.lease_duration)
        lease.spec = spec
        try:
            self._lease = api.replace_namespaced_lease(
                self.name, self.namespace, lease, field_manager=FIELD_MANAGER
            )
        except ApiException as e:
            if e.status == 409:
                return False  # written since we read it: someone else renewed or took it
            raise translate(e) from e
        return True

    def release(self) -> None:
        """Give the Lease up on a clean shutdown, so a standby takes over at its next round."""
        if not self.leading.is_set() or self._lease is None:
            return
        lease = self._lease
        if lease.spec is None:
            return
        lease.spec.holder_identity = ""
        lease.spec.renew_time = dt.datetime.now(dt.UTC)
        lease.spec.lease_duration_seconds = 1
        try:
            self._api().replace_namespaced_lease(
                self.name, self.namespace, lease, field_manager=FIELD_MANAGER
            )
        except ApiException as e:
            log.warning("could not release leader Lease: %s", translate(e))
        self.leading.clear()

    def valid(self) -> bool:
        """Whether this replica may still write as the leader: it leads and renewed within the
        renew deadline by the clock *now*. A leader paused past its Lease (SIGSTOP, a VM
        frozen) must not finish the sync it was in: its elector thread may notice later than
        the next write (it once admitted a node 12 ms after "lost leadership")."""
        return self.leading.is_set() and time.monotonic() - self.renewed_at <= self.renew_deadline

    def run(self, stop: threading.Event, lost: Callable[[], None]) -> None:
        """Campaign, then renew, until ``stop``; call ``lost`` once when leadership ends."""
        last_renew = 0.0
        while not stop.is_set():
            try:
                ok = self.try_acquire_or_renew()
            except Exception as e:  # API unreachable: keep trying until the renew deadline
                log.warning("leader election round failed: %s", e)
                ok = False
            now = time.monotonic()
            if ok:
                last_renew = self.renewed_at = now
                if not self.leading.is_set():
                    log.info(
                        "became leader (%s/%s as %s)", self.namespace, self.name, self.identity
                    )
                    self.leading.set()
            elif self.leading.is_set() and now - last_renew > self.renew_deadline:
                log.error("lost leadership: no renewal for %.0f s", now - last_renew)
                self.leading.clear()
                lost()
                return
            stop.wait(self.retry_period)
