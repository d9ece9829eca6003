"""The controller loop: informers mark the fleet dirty; one sync at most every sync period.

A sync recomputes everything from the caches (level-triggered): one reconcile function per
kind of object (configsets.reconcile, liveness.reconcile, access.reconcile, staging.prune's
admissions) returns an Outcome, and ``Controller._handle`` alone turns it into writes, Events,
metrics and that object's retry schedule (retry.py: Temporary errors back off per object,
Permanent ones wait for the object to change). Only what differs is written: ConfigSet status
(so a burst of node reports is one write per ConfigSet per period), stale nodes' Ready
condition, per-node Roles. Informers run on every replica, so a standby that wins the election
starts from a warm cache; only the leader writes.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodemanager.api import ConfigSet, InvalidObject, nodecert
from nodemanager.api.revisions import admitted
from nodemanager.backoff import Backoff
from nodemanager.controller import (
    access,
    csrapprove,
    effects,
    events,
    fencing,
    firstapplied,
    handler,
    liveness,
    rollout,
    staging,
)
from nodemanager.controller.configsets import Memory, Settings
from nodemanager.controller.configsets import reconcile as reconcile_configset
from nodemanager.controller.effects import Applied, Outcome, Write
from nodemanager.controller.pools import Budget
from nodemanager.controller.poolsync import PoolMemory
from nodemanager.controller.poolsync import reconcile as reconcile_pools
from nodemanager.controller.retry import Gate
from nodemanager.controller.serve import ControllerMetrics, serve
from nodemanager.controller.summary import NodeView
from nodemanager.controller.written import StatusWrites
from nodemanager.kube import csr, watches
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.election import LeaderElector
from nodemanager.kube.fence import NODE_DELETED, POD_DELETED
from nodemanager.kube.fleet import FleetClient
from nodemanager.kube.informer import Informer, Kind
from nodemanager.kube.recorder import EventRecorder, involved

log = logging.getLogger(__name__)
FENCED = {POD_DELETED: "fenced_pod", NODE_DELETED: "fenced_node"}  # the writes metric's labels
LEADER_LEASE = "nodemanager-controller"


@dataclass
class Options:
    kubeconfig: str | None  # a path list, merged as kubectl merges $KUBECONFIG
    context: str | None = None  # kubectl's --context; None: the current context
    namespace: str = "nodemanager"
    leader_elect: bool = False
    identity: str = ""
    sync_period: float = 1.0
    # A full sync at least this often though nothing changed: Lease renewals wake none, and a
    # level-triggered controller should still look at the whole fleet now and then.
    resync_period: float = 5.0
    # While a rollout progresses, its counts are written at most this often: each status write
    # reaches every agent's ConfigSet watch (5,000 events for 5,000 agents). Completion,
    # failure and pause are written at once.
    progress_period: float = 5.0
    # Time one liveness pass may spend reading Leases and marking nodes; the rest wait for the
    # next pass (a second later), so a slow API server cannot stall ConfigSet status for minutes.
    liveness_budget: float = 0.5
    manage_access: bool = True
    # Grant Secret/ConfigMap references through labels nodes report themselves (spoofable).
    trust_node_labels: bool = False
    # A disruption grant (OS upgrade, lock_group) held longer is taken back; 0: never.
    disruption_grant_timeout: float = 3600.0
    metrics_bind_address: str = ":8082"
    health_probe_bind_address: str = ":8083"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # Approve nodes' client certificate requests (controller/csrapprove.py); needs the
    # ClusterRole of deploy/controller.yaml, so it is opt-in.
    approve_node_certificates: bool = False


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Parts:
    """What the controller talks to: built from its Options (``Controller`` without parts),
    or given (the loop's unit tests: an in-memory fleet, informers and recorder)."""

    clients: ClientFactory
    fleet: effects.Fleet
    recorder: EventRecorder
    informers: dict[str, Informer]
    elector: LeaderElector | None = None


class Controller:
    def __init__(self, opts: Options, parts: Parts | None = None) -> None:
        self.opts = opts
        self.stop = threading.Event()
        self.dirty = threading.Event()
        self.lost = False
        self._stale_leader = False  # said once: leadership lapsed, writes stopped
        self.metrics = ControllerMetrics()
        self._init_memory()
        if parts is not None:
            self.clients, self.fleet, self.recorder = parts.clients, parts.fleet, parts.recorder
            self.informers, self.elector = parts.informers, parts.elector
            return
        self.clients = ClientFactory(
            opts.kubeconfig,
            on_request=lambda m: self.metrics.api_requests.labels(m).inc(),
            context=opts.context,
        )
        self.fleet = FleetClient(self.clients, opts.namespace)
        self.recorder = EventRecorder(self.clients, opts.namespace, "nodemanager-controller")
        self.informers = {
            "configsets": self._informer(watches.CONFIGSETS),
            "managednodes": self._informer(watches.MANAGEDNODES),
            "nodepools": self._informer(watches.NODEPOOLS),
            # A renewal changes nothing to write: liveness is a matter of time, checked on
            # every tick, so the 500 renewals a second of 5,000 agents do not each wake a sync.
            "leases": Informer(watches.LEASES, self.clients, opts.namespace, lambda _k: None),
            "revisions": self._informer(
                watches.CONTROLLERREVISIONS, label_selector=rollout.CONFIGSET_LABEL
            ),
        }
        if opts.manage_access:
            selector = "app.kubernetes.io/managed-by=nodemanager-controller"
            self.informers["roles"] = self._informer(watches.ROLES, label_selector=selector)
            self.informers["rolebindings"] = self._informer(
                watches.ROLEBINDINGS, label_selector=selector
            )
            # `rbac`'s own bindings: whether a node's certificate is granted (access.subjects)
            self.informers["nodebindings"] = self._informer(
                watches.ROLEBINDINGS,
                label_selector="app.kubernetes.io/name=nodemanager,!app.kubernetes.io/managed-by",
            )
        if opts.approve_node_certificates:
            # Only this signer's requests by or for this namespace's nodes, without bodies.
            self.informers["csrs"] = self._informer(
                csr.CSRS,
                field_selector=f"spec.signerName={nodecert.SIGNER}",
                keep=functools.partial(csrapprove.slim, namespace=opts.namespace),
            )
        identity = opts.identity or f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self.elector = (
            LeaderElector(
                self.clients,
                opts.namespace,
                LEADER_LEASE,
                identity,
                lease_duration=opts.lease_duration,
                renew_deadline=opts.renew_deadline,
                retry_period=opts.retry_period,
            )
            if opts.leader_elect
            else None
        )

    def _init_memory(self) -> None:
        """What the controller remembers between syncs (all rebuilt after a restart)."""
        opts = self.opts
        self._configsets = Memory()  # what ConfigSet reconciles remember between syncs
        self._pools = PoolMemory()
        self._first_applied = firstapplied.Marks()  # confirmed, perhaps not in the cache yet
        self._settings = Settings(opts.namespace, opts.progress_period, opts.sync_period)
        self._stale_written: dict[str, str] = {}  # node -> resourceVersion the write was based on
        self._warned: set[tuple[str, str, str]] = set()  # (node, field, resourceVersion)
        self._retry = Gate()  # per-object backoff: "ConfigSet/web", "ManagedNode/n1", ...
        self._lease_seen: dict[str, tuple[str, float]] = {}  # node -> (renewTime, first seen)
        self._fenced: dict[str, str] = {}  # node -> the Lease renewTime it was fenced at
        self._judged: dict[str, str] = {}  # certificate request -> resourceVersion judged
        self._wake_at = float("inf")  # the earliest requeue_after of the last sync
        self._keys: set[str] = set()  # the objects the current sync reconciled
        # When a request of ours last got no answer, or one only after a hang
        self._unanswered_at = float("-inf")
        self._failing = False  # the last request got no answer: marks wait for one that does
        self._sync_backoff = Backoff(1.0, 60.0)  # a whole sync that crashed (a bug)
        self._sync_retry_at: float | None = None  # after such a crash: not before then

    def _informer(self, kind: Kind, **kwargs: Any) -> Informer:
        return Informer(
            kind, self.clients, self.opts.namespace, lambda _k: self.dirty.set(), **kwargs
        )

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    # -- one sync ------------------------------------------------------------------------

    def sync(self) -> None:
        """Reconcile every object from the caches; write what differs (effects.apply)."""
        nodes = self.informers["managednodes"].items()
        configsets = self.informers["configsets"].items()
        self._wake_at = float("inf")
        self._keys = set()
        views = [NodeView.from_dict(n) for n in nodes]
        self._warn_invalid(nodes, views)
        self._sync_first_applied(nodes)
        budget = self._sync_pools(configsets, nodes, views)
        self._sync_configsets(configsets, nodes, views, budget)
        self._prune(configsets, nodes)
        self._sync_liveness(nodes)
        if self.opts.manage_access:
            self._sync_access(configsets, nodes)
        if "csrs" in self.informers:
            self._sync_csrs(self.informers["csrs"].items())
        self._retry.retain(self._keys)
        self.metrics.syncs.inc()

    def _handle(
        self,
        key: str,
        version: str,
        reconcile: Outcome | Callable[[], Outcome],
        done: Callable[[Outcome, Applied], None] | None = None,
    ) -> Applied | None:
        """A reconcile's outcome as writes, Events and retries (handler.py), plus the
        metrics and the next wake-up it asks for."""
        self._keys.add(key)
        mono = time.monotonic()
        if self.elector is not None and not self.elector.valid():
            if not self._stale_leader:
                log.warning("leadership not renewed within the deadline: no more writes")
                self._stale_leader = True
            return None  # the rest of this sync is on state another leader may act on
        handled = handler.handle(
            key, version, reconcile, self.fleet, self._retry, mono, self._event, done
        )
        if handled is None:
            return None
        self._answers(handled.result, time.monotonic() - mono)
        for effect in handled.result.done:
            self.metrics.writes.labels(effect.what).inc()
        if handled.outcome.requeue_after is not None:
            self._wake_at = min(self._wake_at, mono + handled.outcome.requeue_after)
        return handled.result

    def _answers(self, result: Applied, took: float) -> None:
        """Whether the API server answers: no answer, or one after a hang, starts blind time
        for liveness that ends with the first prompt answer after it (what the caches show
        may be that old, and the agents could not renew their Leases either)."""
        if (result.error is not None and result.error.status == 0) or took > liveness.SLOW_READ:
            self._unanswered_at, self._failing = time.monotonic(), True
        elif self._failing and (result.done or result.skipped or result.error is not None):
            self._unanswered_at, self._failing = time.monotonic(), False

    def _sync_pools(
        self, configsets: list[dict[str, Any]], nodes: list[dict[str, Any]], views: list[NodeView]
    ) -> Budget:
        """Pools first: their budget is what every staged ConfigSet's rollout draws from."""
        budget, work = reconcile_pools(
            self.informers["nodepools"].items(),
            configsets,
            nodes,
            views,
            self._pools,
            namespace=self.opts.namespace,
            now=stamp(),
            mono=time.monotonic(),
            progress_period=self.opts.progress_period,
            revisions={r["metadata"]["name"] for r in self.informers["revisions"].items()},
            trust_node_labels=self.opts.trust_node_labels,
            grant_deadline=self.opts.disruption_grant_timeout,
        )
        for key, version, outcome in work:
            remember = _remembers(self._pools, key.removeprefix("NodePool/"), version)
            self._handle(key, version, outcome, remember)
        return budget

    def _sync_configsets(
        self,
        configsets: list[dict[str, Any]],
        nodes: list[dict[str, Any]],
        views: list[NodeView],
        budget: Budget | None = None,
    ) -> None:
        revisions = self.informers["revisions"].items()
        now = stamp()
        for raw in configsets:
            meta = raw["metadata"]
            name = meta["name"]

            def one(raw: dict[str, Any] = raw) -> Outcome:
                return reconcile_configset(
                    raw,
                    views,
                    nodes,
                    revisions,
                    self._configsets,
                    self._settings,
                    now=now,
                    mono=time.monotonic(),
                    gate=budget,
                )

            version = str(meta.get("resourceVersion", ""))
            remember = _remembers(self._configsets, name, version)
            self._handle(f"ConfigSet/{name}", version, one, remember)

    def _sync_first_applied(self, nodes: list[dict[str, Any]]) -> None:
        """Record each host seen applying something (firstapplied.py): from then on it is
        never new to the fleet, whatever its status says later."""
        now = stamp()
        for node in nodes:
            meta = node["metadata"]
            version = str(meta.get("resourceVersion", ""))
            outcome = firstapplied.reconcile(node, self._first_applied, now)
            key = f"FirstApplied/{meta['name']}"
            if not outcome.effects:
                self._retry.succeeded(key)
                continue
            result = self._handle(key, version, outcome)
            if result is not None and result.error is None:
                self._first_applied.confirmed(meta["name"], version)
        self._first_applied.retain({n["metadata"]["name"] for n in nodes})

    def _prune(self, configsets: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        """Admissions of deleted, unstaged or unselected ConfigSets, one object each."""
        deferred = effects.Deferred()
        pruned = staging.prune(deferred, configsets, nodes)
        versions = {n["metadata"]["name"]: n["metadata"].get("resourceVersion", "") for n in nodes}
        for (node, name), effect in zip(pruned, deferred.effects, strict=True):
            result = self._handle(
                f"Admission/{node}/{name}",
                str(versions.get(node, "")),
                Outcome((effect,)),
            )
            if result is not None and result.done:
                log.info("ManagedNode %s: admission to %s removed", node, name)

    def _event(self, involved: Mapping[str, Any], note: events.Note) -> None:
        self.recorder.record(
            involved, note.reason, note.message, key=note.key, warning=note.warning
        )
        self.metrics.writes.labels("event").inc()

    def _warn_invalid(self, nodes: list[dict[str, Any]], views: list[NodeView]) -> None:
        """One Warning Event per bad field of a node's status (per version of the node): the
        entry is skipped, that node counts as not reported, every other node is unaffected."""
        warned = set()
        for raw, view in zip(nodes, views, strict=True):
            meta = raw["metadata"]
            for problem in view.problems:
                key = (problem.node, problem.field, meta.get("resourceVersion", ""))
                warned.add(key)
                if key in self._warned:
                    continue
                log.warning("ManagedNode %s: %s is invalid; skipped", problem.node, problem.field)
                note = events.invalid_status(problem.node, problem.field)
                self._event(involved(raw, "ManagedNode"), note)
        self._warned = warned

    def _sync_liveness(self, nodes: list[dict[str, Any]]) -> None:
        leases = {lease["metadata"]["name"]: lease for lease in self.informers["leases"].items()}
        mono, now = time.monotonic(), stamp()
        # Time the Lease cache was blind (its watch failing, or our own requests unanswered: an
        # API outage or a hung server, agents unable to renew either) does not count: after
        # it, every node gets a whole lease to renew.
        blind_until = max(self.informers["leases"].failed_at, self._unanswered_at)
        budget = mono + self.opts.liveness_budget
        seen: dict[str, tuple[str, float]] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            lease = liveness.own_lease(leases.get(name), name)
            record = liveness.renew_time(lease)
            prior = self._lease_seen.get(name)
            seen[name] = prior if prior and prior[0] == record else (record, mono)
            unchanged = mono - max(seen[name][1], blind_until)
            outcome = liveness.reconcile(
                # Until the server answers again, only probe whether it does.
                node,
                lease,
                unchanged,
                self._stale_written.get(name),
                now,
                probe=self._failing,
            )
            key = f"ManagedNode/{name}"
            if not outcome.effects:
                self._retry.succeeded(key)  # nothing to retry: no wake-up is due for it
                continue
            if time.monotonic() > budget:
                self._keys.add(key)
                continue  # over budget: the rest wait for the next pass, a second later
            result = self._handle(
                key,
                str(node["metadata"].get("resourceVersion", "")),
                outcome,
            )
            if result is None:
                continue
            self.metrics.lease_reads.inc(len(result.done) + len(result.skipped))
            if result.skipped:  # renewed since the cache showed it (or a hang): seen from now
                seen[name] = (record, time.monotonic())
            elif result.done:
                log.info("ManagedNode %s: Ready=Unknown (%s)", name, _message(outcome))
                self._stale_written[name] = str(node["metadata"].get("resourceVersion", ""))
        self._lease_seen = seen
        if not self._failing:  # a server that does not answer proves no host is gone
            self._sync_fencing(nodes, leases, lambda n: mono - max(seen[n][1], blind_until))

    def _sync_fencing(
        self,
        nodes: list[dict[str, Any]],
        leases: Mapping[str, dict[str, Any]],
        unchanged_for: Callable[[str], float],
    ) -> None:
        for node in nodes:
            name = node["metadata"]["name"]
            lease = liveness.own_lease(leases.get(name), name)
            outcome = fencing.reconcile(
                node, lease, unchanged_for(name), self._fenced.get(name), self._fence_event
            )
            key = f"Fence/{name}"
            if not outcome.effects:
                self._retry.succeeded(key)
                continue
            record = liveness.renew_time(lease)
            result = self._handle(key, record, outcome)
            if result is not None and result.done:
                log.warning("ManagedNode %s fenced: %s", name, _message(outcome))
                self._fenced[name] = record
            elif result is not None and result.error is not None:
                message = f"fencing {name} failed: {result.error}"
                self._fence_event(node, "FencingFailed", message, record)
        live = {n["metadata"]["name"] for n in nodes}
        self._fenced = {n: r for n, r in self._fenced.items() if n in live}

    def _fence_event(self, node: Mapping[str, Any], reason: str, message: str, key: str) -> None:
        self._event(involved(node, "ManagedNode"), events.Note(reason, message, key, warning=True))
        if reason in FENCED:
            self.metrics.writes.labels(FENCED[reason]).inc()

    def _sync_csrs(self, requests: list[dict[str, Any]]) -> None:
        """Nodes' certificate requests (csrapprove.py), each judged once per version."""
        live = {r["metadata"]["name"] for r in requests}
        self._judged = {n: v for n, v in self._judged.items() if n in live}
        stale = set(csrapprove.superseded(requests, self.opts.namespace))
        for raw in requests:
            meta = raw["metadata"]
            if meta["name"] in stale:  # a newer pending request of the same node replaced it
                delete = Write("csr_deleted", "delete_csr", (meta["name"],))
                key = f"CertificateSigningRequest/{meta['name']}"
                self._handle(key, str(meta.get("resourceVersion")), Outcome((delete,)))
                continue
            version = str(meta.get("resourceVersion"))
            outcome = csrapprove.reconcile(
                raw,
                self.opts.namespace,
                self._judged.get(meta["name"]),
                lambda r, d: self._event(*csrapprove.note(r, d)),
            )
            result = self._handle(f"CertificateSigningRequest/{meta['name']}", version, outcome)
            if result is not None and result.error is None:
                self._judged[meta["name"]] = version

    def _sync_access(self, configsets: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> None:
        revisions = {r["metadata"]["name"]: r for r in self.informers["revisions"].items()}
        parsed: dict[str, ConfigSet | None] = {}  # by resourceVersion (with its revision)

        def applied_by(node: dict[str, Any]) -> list[ConfigSet]:
            """What the node applies: a staged ConfigSet's admitted revision (held back by a
            paused rollout, it still needs that revision's Secrets), else the live spec."""
            out = []
            for raw in admitted(configsets, node, revisions)[0]:
                key = str(raw["metadata"].get("resourceVersion", "")) + raw["metadata"]["name"]
                if key not in parsed:
                    try:
                        parsed[key] = ConfigSet.from_dict(raw)
                    except InvalidObject:
                        parsed[key] = None  # agents apply nothing of it: it grants nothing
                cs = parsed[key]
                if cs is not None:
                    out.append(cs)
            return out

        roles = {r["metadata"]["name"]: r for r in self.informers["roles"].items()}
        bindings = {b["metadata"]["name"]: b for b in self.informers["rolebindings"].items()}
        granted = {b["metadata"]["name"]: b for b in self.informers["nodebindings"].items()}
        wanted_names = set()
        for node in nodes:
            name = access.role_name(node["metadata"]["name"])
            wanted_names.add(name)
            outcome = access.reconcile(
                node,
                applied_by(node),
                roles.get(name),
                bindings.get(name),
                self.opts.namespace,
                trust_node_labels=self.opts.trust_node_labels,
                node_binding=granted.get(access.node_binding_name(node["metadata"]["name"])),
            )
            # Retried when the node or what it should be granted changes.
            version = f"{node['metadata'].get('resourceVersion', '')}/{_digest(outcome)}"
            self._handle(f"Role/{name}", version, outcome)
        for name in (set(roles) | set(bindings)) - wanted_names:  # the node is gone
            self._handle(
                f"Role/{name}",
                "deleted",
                Outcome((Write("rbac_deleted", "delete_rbac", (name,)),)),
            )

    # -- the loop ------------------------------------------------------------------------

    def _synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers.values())

    def _lost(self) -> None:
        self.lost = True
        self.shutdown()

    def run(self) -> int:
        """Run until stopped; the exit code (1 when leadership was lost, so it restarts)."""
        servers = serve(
            self.opts.metrics_bind_address,
            self.opts.health_probe_bind_address,
            self.metrics,
            alive=lambda: not self.stop.is_set(),
            leading=lambda: self.leading() and self._synced(),
        )
        self._start_threads()
        last_sync, was_leading = 0.0, False
        while not self.stop.is_set():
            # Wake for changes, and at least every second: Lease expiry is a matter of time.
            changed = self.dirty.wait(1.0)
            if self.stop.is_set():
                break
            leading = self.leading()
            self.metrics.leader.set(1 if leading else 0)
            if not leading or not self._synced():
                was_leading = leading
                continue
            if not was_leading:
                log.info("leading: syncing the fleet")
                was_leading = True
            retry_at = self._sync_retry_at
            backing_off = retry_at is not None and time.monotonic() < retry_at
            if backing_off or (not changed and last_sync and not self._due(last_sync)):
                self._sync_liveness(self.informers["managednodes"].items())
                continue
            wait = last_sync + self.opts.sync_period - time.monotonic()
            if wait > 0 and self.stop.wait(wait):  # coalesce: one sync per period at most
                break
            last_sync = time.monotonic()
            self._sync_once()
        self._close(servers)
        return 1 if self.lost else 0

    def _start_threads(self) -> None:
        for name, informer in self.informers.items():
            threading.Thread(
                target=informer.run, args=(self.stop,), name=f"informer-{name}", daemon=True
            ).start()
        if self.elector:
            threading.Thread(
                target=self.elector.run, args=(self.stop, self._lost), name="elector", daemon=True
            ).start()

    def _due(self, last_sync: float) -> bool:
        """A whole sync is due without a change: the resync period passed, or a requeue or a
        retry is due."""
        now = time.monotonic()
        retry_at = float("inf") if self._sync_retry_at is None else self._sync_retry_at
        due = min(self._wake_at, self._retry.next_due() or float("inf"), retry_at)
        return due <= now or now - last_sync >= self.opts.resync_period

    def _sync_once(self) -> None:
        """One whole sync; one that crashes outside the per-object handler (a bug) is tried
        again with backoff (1 s doubling to 60 s), not every second; liveness goes on."""
        self.dirty.clear()
        try:
            self.sync()
        except Exception:
            delay = self._sync_backoff.next()
            log.exception("sync failed; again in %.1f s", delay)
            self._sync_retry_at = time.monotonic() + delay
            return
        self._sync_backoff.reset()
        self._sync_retry_at = None  # no retry pending: a past time here made every tick "due"

    def _close(self, servers: Sequence[Any]) -> None:
        if self.elector and not self.lost:
            self.elector.release()
        for server in servers:
            server.shutdown()
        self.clients.close()
        log.info("stopped")

    def shutdown(self) -> None:
        self.stop.set()
        self.dirty.set()


def _remembers(memory: StatusWrites, name: str, version: str) -> Callable[[Outcome, Applied], None]:
    """What ``_handle`` calls after a reconcile's writes went through: the status write the
    server took is remembered with the version of the object it was computed from."""
    return lambda _, result: memory.applied(name, result.done, time.monotonic(), version)


def _message(outcome: Outcome) -> str:
    first = outcome.effects[0] if outcome.effects else None
    if isinstance(first, fencing.Fence):
        return first.why
    return first.message if isinstance(first, liveness.MarkUnknown) else ""


def _digest(outcome: Outcome) -> str:
    """A short fingerprint of what an outcome writes (a permanent failure waits for a change)."""
    return hashlib.sha256(repr(outcome.effects).encode()).hexdigest()[:12]
