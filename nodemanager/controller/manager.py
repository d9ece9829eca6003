"""The controller loop: informers mark the fleet dirty; one sync at most every sync period.

A sync recomputes everything from the caches (level-triggered) and writes only what differs:
ConfigSet status (so a burst of node reports is one write per ConfigSet per period), stale
nodes' Ready condition, per-node Roles. Informers run on every replica, so a standby that wins
the election starts from a warm cache; only the leader writes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from nodemanager.api import ConfigSet, InvalidObject
from nodemanager.api.revisions import admitted
from nodemanager.controller import access, csrapprove, events, liveness, rollout, staging
from nodemanager.controller.fencing import Fencer
from nodemanager.controller.retry import Gate
from nodemanager.controller.serve import ControllerMetrics, serve
from nodemanager.controller.summary import NodeView, configset_status, differs, progress_only
from nodemanager.kube import csr, watches
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.election import LeaderElector
from nodemanager.kube.errors import KubeError
from nodemanager.kube.fleet import FleetClient
from nodemanager.kube.informer import Informer, Kind
from nodemanager.kube.recorder import EventRecorder

log = logging.getLogger(__name__)
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


class Controller:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.stop = threading.Event()
        self.dirty = threading.Event()
        self.lost = False
        self.metrics = ControllerMetrics()
        self.clients = ClientFactory(
            opts.kubeconfig,
            on_request=lambda m: self.metrics.api_requests.labels(m).inc(),
            context=opts.context,
        )
        self.fleet = FleetClient(self.clients, opts.namespace)
        self.recorder = EventRecorder(self.clients, opts.namespace, "nodemanager-controller")
        self.fencer = Fencer(self.clients, self.fleet, self.recorder, self.metrics.writes)
        self.informers = {
            "configsets": self._informer(watches.CONFIGSETS),
            "managednodes": self._informer(watches.MANAGEDNODES),
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
        self.approver = (
            csrapprove.Approver(self.clients, self.recorder, opts.namespace)
            if opts.approve_node_certificates
            else None
        )
        if self.approver:
            self.informers["csrs"] = self._informer(csr.CSRS)
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
        # What this replica wrote and the cache may not show yet, so a lagging watch never
        # causes a second identical write.
        self._written: dict[str, dict[str, Any]] = {}
        self._stale_written: dict[str, str] = {}  # node -> resourceVersion the write was based on
        self._warned: set[tuple[str, str, str]] = set()  # (node, field, resourceVersion)
        self._ready_marked: dict[tuple[str, str, str], str] = {}  # (configset, node, revision)
        # ConfigSet -> (revision, updated nodes, when that last changed): progress deadlines
        self._progress: dict[str, tuple[str, int, float]] = {}
        self._retry = Gate()  # per-ConfigSet backoff of failed rollout steps
        self._lease_seen: dict[str, tuple[str, float]] = {}  # node -> (renewTime, first seen)
        self._targets: dict[str, str] = {}  # ConfigSet -> revision its rollout last aimed at
        self._rolling = False  # a rollout waits on time (minReadySeconds): sync every tick
        self._written_at: dict[str, float] = {}  # ConfigSet -> when its status was last written
        self._deferred = False  # a progress-only status write waits: sync again next tick

    def _informer(self, kind: Kind, **kwargs: Any) -> Informer:
        return Informer(
            kind, self.clients, self.opts.namespace, lambda _k: self.dirty.set(), **kwargs
        )

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading.is_set()

    # -- one sync ------------------------------------------------------------------------

    def sync(self) -> None:
        """Recompute everything from the caches and write what differs."""
        nodes = self.informers["managednodes"].items()
        configsets = self.informers["configsets"].items()
        self._sync_configsets(configsets, nodes)
        for node, name in staging.prune(self.fleet, configsets, nodes):
            log.info("ManagedNode %s: admission to %s removed", node, name)
            self.metrics.writes.labels("admission_pruned").inc()
        self._sync_liveness(nodes)
        if self.opts.manage_access:
            self._sync_access(configsets, nodes)
        if self.approver:
            self.approver.sync(self.informers["csrs"].items())
        self.metrics.syncs.inc()

    def _sync_configsets(
        self, configsets: list[dict[str, Any]], nodes: list[dict[str, Any]]
    ) -> None:
        views = [NodeView.from_dict(n) for n in nodes]
        self._warn_invalid(nodes, views)
        now = stamp()
        self._rolling = self._deferred = False
        for raw in configsets:
            try:
                self._sync_configset(raw, nodes, views, now)
            except Exception:
                # One ConfigSet's surprise (a bug, odd data) must not stop the others' status.
                log.exception("ConfigSet %s: sync failed", raw["metadata"].get("name"))
                self.dirty.set()
        self._rolling = self._rolling or self._retry.waiting()  # wake when a backoff ends

    def _sync_configset(
        self, raw: dict[str, Any], nodes: list[dict[str, Any]], views: list[NodeView], now: str
    ) -> None:
        name = raw["metadata"]["name"]
        cached = raw.get("status") or {}
        written = self._written.get(name)
        if written is not None and not differs(written, cached):
            del self._written[name]  # the cache caught up
            written = None
        base = {**raw, "status": written if written is not None else cached}
        settings = rollout.Rollout.of(raw.get("spec") or {})
        notes: list[events.Note] = []
        if settings is None:
            wanted = configset_status(base, views, now=now)
        else:
            version, mono = raw["metadata"].get("resourceVersion", ""), time.monotonic()
            if not self._retry.ready(name, version, mono):
                return  # backing off (or a permanent error until the ConfigSet changes)
            try:
                step = self._rollout(raw, settings, nodes)
            except KubeError as e:
                delay = self._retry.failed(name, version, e, mono)
                log.warning(
                    "ConfigSet %s: rollout step failed (retry in %.0f s): %s", name, delay, e
                )
                return
            self._retry.succeeded(name)
            held = bool((raw.get("spec") or {}).get("paused")) or bool(step.halted)
            stalled = self._stalled(name, settings, step, held)
            wanted = configset_status(
                base,
                views,
                now=now,
                extra=step.extra,
                counts=step.counts,
                halted=step.halted,
                stalled=stalled,
            )
            # An unfinished rollout needs a sync when its deadline passes, not only on change.
            self._rolling = self._rolling or bool(step.counts.pending and not stalled and not held)
            notes = step.notes
            self._rolling = self._rolling or (
                settings.min_ready_seconds > 0 and step.extra["unavailable"] > 0
            )
        if differs(wanted, base["status"]) and self._progress_waits(name, wanted, base):
            self._deferred = True
        elif differs(wanted, base["status"]):
            try:
                self.fleet.patch_configset_status(name, wanted)
            except KubeError as e:
                if e.status != 404:  # 404: deleted since the cache saw it
                    log.warning("ConfigSet %s: status write failed: %s", name, e)
                    self.dirty.set()
                self._record(raw, notes)
                return
            self._written[name] = wanted
            self._written_at[name] = time.monotonic()
            self.metrics.writes.labels("configset_status").inc()
            # Transitions only from a status actually written: a failed write is retried
            # and must not say it twice.
            notes = notes + events.transitions(base["status"], wanted)
        self._record(raw, notes)

    def _stalled(
        self, name: str, settings: rollout.Rollout, step: staging.Outcome, held: bool
    ) -> str:
        """The ProgressDeadlineExceeded message once no node got updated for the deadline (the
        controller's clock; a restart gives the rollout a whole deadline again)."""
        mark = (str(step.extra["updateRevision"]), len(step.counts.updated))
        prior = self._progress.get(name)
        mono = time.monotonic()
        if prior is None or prior[:2] != mark or not step.counts.pending or held:
            self._progress[name] = (*mark, mono)
            return ""
        if mono - prior[2] < settings.progress_deadline_seconds:
            return ""
        return (
            f"no node updated for {settings.progress_deadline_seconds}s; "
            f"waiting for {events.names(step.counts.pending)}"
        )

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
                involved = {
                    "apiVersion": raw.get("apiVersion", "common.nodemanager/v1"),
                    "kind": "ManagedNode",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                }
                note = events.invalid_status(problem.node, problem.field)
                self.recorder.record(
                    involved, note.reason, note.message, key=note.key, warning=True
                )
                self.metrics.writes.labels("event").inc()
        self._warned = warned

    def _progress_waits(self, name: str, wanted: dict[str, Any], base: dict[str, Any]) -> bool:
        since = time.monotonic() - self._written_at.get(name, float("-inf"))
        return since < self.opts.progress_period and progress_only(wanted, base["status"])

    def _record(self, raw: dict[str, Any], notes: list[events.Note]) -> None:
        meta = raw["metadata"]
        involved = {
            "apiVersion": raw.get("apiVersion", "common.nodemanager/v1"),
            "kind": "ConfigSet",
            "name": meta["name"],
            "uid": meta.get("uid", ""),
        }
        for note in notes:
            self.recorder.record(
                involved, note.reason, note.message, key=note.key, warning=note.warning
            )
            self.metrics.writes.labels("event").inc()

    def _rollout(
        self, raw: dict[str, Any], settings: rollout.Rollout, nodes: list[dict[str, Any]]
    ) -> staging.Outcome:
        name = raw["metadata"]["name"]
        revisions = [
            r
            for r in self.informers["revisions"].items()
            if (r["metadata"].get("labels") or {}).get(rollout.CONFIGSET_LABEL) == name
        ]
        last = self._targets.get(name) or (raw.get("status") or {}).get("updateRevision")
        step = staging.sync(
            self.fleet,
            self.opts.namespace,
            raw,
            settings,
            nodes,
            revisions,
            last,
            self._ready_marked,
        )
        self._targets[name] = step.extra["updateRevision"]
        return step

    def _sync_liveness(self, nodes: list[dict[str, Any]]) -> None:
        leases = {lease["metadata"]["name"]: lease for lease in self.informers["leases"].items()}
        mono, now = time.monotonic(), stamp()
        # Time the Lease cache was blind (its watch failing: an API outage, agents unable to
        # renew either) does not count: after it, every node gets a whole lease to renew.
        blind_until = self.informers["leases"].failed_at
        budget = mono + self.opts.liveness_budget
        seen: dict[str, tuple[str, float]] = {}
        for node in nodes:
            name, rv = node["metadata"]["name"], node["metadata"].get("resourceVersion", "")
            lease = leases.get(name)
            record = liveness.renew_time(lease)
            prior = self._lease_seen.get(name)
            seen[name] = prior if prior and prior[0] == record else (record, mono)
            message = liveness.expired(lease, mono - max(seen[name][1], blind_until))
            if message is None or self._stale_written.get(name) == rv:
                continue
            conditions = liveness.stale_conditions(node, message, now)
            if conditions is None or time.monotonic() > budget:
                continue
            try:
                # The cache may lag behind a busy API server: a renewal it has not shown yet
                # must not mark a live node. One read of the Lease per candidate confirms it.
                fresh = self.fleet.get_lease(name)
                self.metrics.lease_reads.inc()
                if liveness.renewed(fresh, record):
                    # Seen from now: this sync's start may be long past on a busy server.
                    seen[name] = (liveness.renew_time(fresh), time.monotonic())
                    continue
                self.fleet.patch_node_conditions(name, rv, conditions)
            except KubeError as e:
                if e.status in (404, 409):
                    self.dirty.set()  # the agent (or a delete) got there first: recompute
                    continue
                log.warning("ManagedNode %s: cannot mark Ready=Unknown: %s", name, e)
                continue
            log.info("ManagedNode %s: Ready=Unknown (%s)", name, message)
            self._stale_written[name] = rv
            self.metrics.writes.labels("node_ready_unknown").inc()
        self._lease_seen = seen
        self.fencer.sync(nodes, leases, lambda n: mono - max(seen[n][1], blind_until), mono)

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
        bindings = {b["metadata"]["name"] for b in self.informers["rolebindings"].items()}
        wanted_names = set()
        for node in nodes:
            meta = node["metadata"]
            name = access.role_name(meta["name"])
            wanted_names.add(name)
            labels = meta.get("labels") or {}
            if not self.opts.trust_node_labels:
                labels = access.trusted(labels)
            wanted = access.rules(*access.references(applied_by(node), labels))
            try:
                current = roles.get(name)
                if current is None or access.normalised(current.get("rules")) != wanted:
                    self.fleet.put_role(access.role(node, self.opts.namespace, wanted))
                    self.metrics.writes.labels("role").inc()
                if name not in bindings:
                    self.fleet.create_binding(access.binding(node, self.opts.namespace))
                    self.metrics.writes.labels("rolebinding").inc()
            except KubeError as e:
                log.warning("Role %s: write failed: %s", name, e)
                self.dirty.set()
        for name in (set(roles) | bindings) - wanted_names:  # the node is gone
            try:
                self.fleet.delete_rbac(name)
            except KubeError as e:
                log.warning("Role %s: delete failed: %s", name, e)

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
        for name, informer in self.informers.items():
            threading.Thread(
                target=informer.run, args=(self.stop,), name=f"informer-{name}", daemon=True
            ).start()
        if self.elector:
            threading.Thread(
                target=self.elector.run, args=(self.stop, self._lost), name="elector", daemon=True
            ).start()
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
            idle = time.monotonic() - last_sync < self.opts.resync_period
            waiting = self._rolling or self._deferred
            if not changed and was_leading and last_sync and not waiting and idle:
                self._sync_liveness(self.informers["managednodes"].items())
                continue
            wait = last_sync + self.opts.sync_period - time.monotonic()
            if wait > 0 and self.stop.wait(wait):  # coalesce: one sync per period at most
                break
            self.dirty.clear()
            last_sync = time.monotonic()
            try:
                self.sync()
            except Exception:
                log.exception("sync failed")
                self.dirty.set()
        if self.elector and not self.lost:
            self.elector.release()
        for server in servers:
            server.shutdown()
        self.clients.close()
        log.info("stopped")
        return 1 if self.lost else 0

    def shutdown(self) -> None:
        self.stop.set()
        self.dirty.set()
