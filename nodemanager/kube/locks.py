"""Group locks: a ``coordination.k8s.io`` Lease named after the group, held by one node at a time.

Upstream's semantics (its ``leaselocker``): the Lease is created by the first taker; a Lease
held by another node and not expired (renewTime + leaseDurationSeconds in the future) is busy;
an expired one may be taken over; releasing clears the holder and backdates renewTime. The
write is optimistic (resourceVersion), so two nodes racing for a free Lease cannot both win:
the loser gets 409 Conflict and reads again. ``acquireTime`` and ``leaseTransitions`` show who
held it last and how often it changed hands.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from nodemanager.api.duration import MAX_LEASE_SECONDS
from nodemanager.kube.client import FIELD_MANAGER, ClientFactory
from nodemanager.kube.errors import Forbidden, translate

log = logging.getLogger(__name__)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class GroupLock:
    """Take and give back group Leases in one namespace as ``identity`` (the node's name)."""

    def __init__(self, clients: ClientFactory, namespace: str, identity: str):
        self.clients, self.namespace, self.identity = clients, namespace, identity
        # name -> (resourceVersion, when this node first saw it, on its monotonic clock)
        self._seen: dict[str, tuple[str, float]] = {}

    def _unchanged_for(self, name: str, version: str) -> float:
        """Seconds this node has seen the Lease ``name`` at ``version`` (client-go's observed
        time): a holder that stops writing is stale after its duration whatever renewTime it
        wrote, in 2099 or by a clock an hour ahead."""
        seen = self._seen.get(name)
        if seen is None or seen[0] != version:
            self._seen[name] = (version, time.monotonic())
            return 0.0
        return time.monotonic() - seen[1]

    def _api(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self.clients.get())

    def try_acquire(self, name: str, duration_seconds: int = 300) -> str | None:
        """Take the Lease ``name``; None when this node holds it now, else the holder's name."""
        api, stamp = self._api(), _now()
        try:
            lease = api.read_namespaced_lease(name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise translate(e) from e
            body = client.V1Lease(
                metadata=client.V1ObjectMeta(name=name, namespace=self.namespace),
                spec=client.V1LeaseSpec(
                    holder_identity=self.identity,
                    lease_duration_seconds=duration_seconds,
                    acquire_time=stamp,
                    renew_time=stamp,
                    lease_transitions=0,
                ),
            )
            try:
                api.create_namespaced_lease(self.namespace, body, field_manager=FIELD_MANAGER)
                return None
            except ApiException as e2:
                if e2.status == 409:
                    return "another node"  # created by someone else a moment ago
                if e2.status == 403:  # nodes create no Lease: `rbac` makes the group's
                    raise Forbidden(
                        f"Lease {name} does not exist and this node may not create it: apply "
                        f"`nodemanager rbac --hostname {self.identity} --lease-groups {name}` "
                        "again",
                        "Forbidden",
                        403,
                    ) from e2
                raise translate(e2) from e2
        spec = lease.spec or client.V1LeaseSpec()
        lease.spec = spec
        holder = spec.holder_identity
        version = str(lease.metadata.resource_version if lease.metadata else "")
        stale = self._unchanged_for(name, version) > _duration(spec)
        if holder and holder != self.identity and not (stale or _expired(spec, stamp)):
            return str(holder)
        if holder != self.identity:
            spec.acquire_time = stamp
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.renew_time = stamp
        spec.lease_duration_seconds = duration_seconds
        try:
            api.replace_namespaced_lease(name, self.namespace, lease, field_manager=FIELD_MANAGER)
        except ApiException as e:
            if e.status == 409:
                return "another node"  # it changed hands between our read and write
            raise translate(e) from e
        return None

    def release(self, name: str) -> None:
        """Give the Lease back if this node holds it (anything else is left alone)."""
        api = self._api()
        try:
            lease = api.read_namespaced_lease(name, self.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.renew_time = _now() - dt.timedelta(hours=2)
            api.replace_namespaced_lease(name, self.namespace, lease, field_manager=FIELD_MANAGER)
        except ApiException as e:
            if e.status == 404:
                return
            raise translate(e) from e


def _duration(spec: client.V1LeaseSpec) -> int:
    """The holder's duration, at most MAX_LEASE_SECONDS: a Lease written for 68 years is held
    no longer than the longest any agent asks for."""
    return min(spec.lease_duration_seconds or 0, MAX_LEASE_SECONDS)


def _expired(spec: client.V1LeaseSpec, at: dt.datetime) -> bool:
    renewed = spec.renew_time or spec.acquire_time
    if renewed is None:
        return True
    return renewed + dt.timedelta(seconds=_duration(spec)) < at
