"""The long-running agent: informers mark the node dirty, one worker reconciles from the cache.

Threads: one per informer, the lease heartbeat, the registration loop, the metrics and health
servers, the status writer and the signal reader; the worker runs in the main thread. Watch
events never do work themselves: they set a flag the worker waits on, so a burst of events
costs one reconcile (level-triggered, coalesced). Changes of other nodes (read by templates
through ``nodes``) wake the worker at most once per ``--peer-min-interval``.

The worker never waits on the API server: status, Events and notifications go to the writer
thread (``writer.py``). It reports its progress to ``Liveness``: /healthz fails and the Lease
is no longer renewed while a reconcile runs past ``--reconcile-timeout``. A reconcile that
cannot complete (it raised) is said at once: Ready=False with reason ReconcileError, /readyz
503 and ``nodemanager_reconcile_total{outcome="error"}``; /healthz fails once that lasted
``--reconcile-failing-timeout``.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nodemanager.agent import cleanup
from nodemanager.agent.earlyoom import EarlyOom, settings
from nodemanager.agent.fencing import FencingAgent
from nodemanager.agent.grouplocks import GroupLocks
from nodemanager.agent.health import Liveness, serve_health
from nodemanager.agent.hostfeatures import HostFeatures
from nodemanager.agent.identity import identify
from nodemanager.agent.metrics import Metrics
from nodemanager.agent.ownlabels import drifted
from nodemanager.agent.peers import PeerFilter, clean_own
from nodemanager.agent.poolslot import PoolSlots
from nodemanager.agent.pressure import DEFAULT_THRESHOLD, PressureMonitor, threshold
from nodemanager.agent.reconcile import Notification, Reconciler
from nodemanager.agent.refs import referenced
from nodemanager.agent.retries import stable
from nodemanager.agent.revisions import REVISION_LABEL, admitted, report
from nodemanager.agent.schedule import Schedule
from nodemanager.agent.selftest import PolicySelfTest
from nodemanager.agent.signals import Signals
from nodemanager.agent.state import Snapshot, StateStore
from nodemanager.agent.status import changed
from nodemanager.agent.upgrade import Upgrader
from nodemanager.agent.watchdog import Watchdog
from nodemanager.agent.writer import Writer
from nodemanager.api import parse_duration
from nodemanager.api.fencing import MAX_DEVICE_TIMEOUT
from nodemanager.api.nodereport import set_condition
from nodemanager.api.nodestatus import printable
from nodemanager.backoff import Backoff
from nodemanager.desired.redact import decoded, scrub
from nodemanager.endpoints import serve_metrics
from nodemanager.executor.run import apply
from nodemanager.host.observe import observe
from nodemanager.kube import watches
from nodemanager.kube.client import ClientFactory
from nodemanager.kube.drain import NodeDrainer
from nodemanager.kube.errors import Forbidden
from nodemanager.kube.informer import Informer, Kind
from nodemanager.kube.locks import GroupLock
from nodemanager.kube.nodes import NodeClient
from nodemanager.kube.notify import NOTIFIED_AT, NOTIFIED_BY, Notifier, notify_key
from nodemanager.kube.policycheck import missing_policies
from nodemanager.kube.refs import NamedWatches
from nodemanager.version import build_info

log = logging.getLogger(__name__)
LEASE_PERIOD = 10.0
UPGRADE_CHECK = 20.0  # seconds; a cron minute is never missed
PRESSURE_PERIOD = 5.0  # seconds between PSI samples (avg10 is a 10 s window)


@dataclass
class Options:
    kubeconfig: str | None  # a path list, merged as kubectl merges $KUBECONFIG
    context: str | None = None  # kubectl's --context; None: the current context
    namespace: str = "nodemanager"
    hostname: str | None = None
    node_labels: dict[str, str] = field(default_factory=dict)
    state_dir: str = "/var/lib/nodemanager"
    drift_check_interval: float = 1800.0  # 0: event-driven only
    peer_min_interval: float = 10.0  # at most one reconcile per this for other nodes' changes
    reconcile_timeout: float = 1800.0  # a reconcile running longer fails /healthz; 0: never
    # reconciles that cannot complete for longer fail /healthz; 0: never
    reconcile_failing_timeout: float = 300.0
    backup_max_age: float | None = 30 * 86400.0  # None: keep file backups forever
    filebucket_path: str | None = None  # upstream's file backups; None: <state_dir>/filebucket
    reboot_command: list[str] | None = None  # after an upgrade that needs one; None: the host's
    drain_timeout: float = 600.0  # seconds a drain before an upgrade may take
    notify_on_change: bool = False  # also notified-at/-by whenever a ConfigSet changed the host
    metrics_bind_address: str = ":8080"
    health_probe_bind_address: str = ":8081"
    memory_pressure_threshold: float = DEFAULT_THRESHOLD  # memory some avg10 percent
    pressure_dir: str = "/proc/pressure"  # tests point it at a directory they write
    watchdog_device: str = "/dev/watchdog"  # opened only with spec.fencing.enabled
    watchdog_timeout: int = 20  # seconds, set on the device; a keepalive every quarter of it
    token_renewer: Renewer | None = None  # when the kubeconfig holds a node token


class Renewer(Protocol):
    """Keeps the agent's credential fresh until stopped (bootstrap/ renews a node token)."""

    def run(self, stop: threading.Event) -> None: ...


class Dirty:
    """A coalescing 'something changed' flag; peers' changes are told apart (rate-limited)."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.full = False
        self.own = False  # anything but a peer's change

    def mark(self, _source: str = "", *, full: bool = False, peer: bool = False) -> None:
        self.full = self.full or full
        self.own = self.own or not peer
        self._event.set()

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)

    def take(self) -> tuple[bool, bool]:
        """Clear the flag; (whether a full run was asked for, whether only peers changed)."""
        self._event.clear()
        full, self.full = self.full, False
        own, self.own = self.own, False
        return full, not own and not full


class Daemon:
    def __init__(self, opts: Options):
        self.opts = opts
        self.stop = threading.Event()
        self.dirty = Dirty()
        identity = identify(opts.hostname, custom=opts.node_labels)
        self.name, self.managed_labels = identity.name, dict(identity.labels)
        self.metrics = Metrics(node=self.name)
        self._offline = False  # announced once when it starts and when it ends
        self.fatal: str | None = None  # why the agent stopped itself (non-zero exit)
        self.clients = ClientFactory(
            opts.kubeconfig,
            on_request=lambda m: self.metrics.api_requests.labels(m).inc(),
            context=opts.context,
        )
        self.node_client = NodeClient(self.clients, opts.namespace, self.name)
        self.notifier = Notifier(self.clients)
        # (ConfigSet, spec.notifies index) -> the generation that target was told of
        self._notified: dict[tuple[str, int], int] = {}
        self.store = StateStore(opts.state_dir)
        # Run dirs live under the state dir (0700), so a restart finds what a kill -9 left.
        self.runs = Path(opts.state_dir) / "runs"
        self.liveness = Liveness(opts.reconcile_timeout, opts.reconcile_failing_timeout)
        self.writer = Writer(self._patch_status)
        self.stopped = threading.Event()
        # One request for a slot of the pool's budget, shared by the upgrade and lock_group.
        self.slots = PoolSlots(
            GroupLock(self.clients, opts.namespace, self.name),
            lambda: self.informers["self"].get(self.name),
            self.node_client.patch_status,
            Path(opts.state_dir) / "pool-request",
        )
        self.upgrader = Upgrader(
            name=self.name,
            family=identity.family,
            state_dir=opts.state_dir,
            metrics=self.metrics,
            locker=self.slots.locker("OS upgrade"),
            pooled=True,
            drainer=NodeDrainer(self.clients, self.name, wait=self.stop.wait),
            drain_timeout=opts.drain_timeout,
            reboot=opts.reboot_command,
        )
        self.work = threading.Lock()  # one of reconcile or upgrade changes the host at a time
        self.reconciler = Reconciler(
            name=self.name,
            managed_labels=self.managed_labels,
            family=identity.family,
            store=self.store,
            metrics=self.metrics,
            agent_version=build_info().version,  # the full version, as --version says
            observe=lambda: clean_own(observe()),
            host=HostFeatures(
                opts.state_dir,
                backup_max_age=opts.backup_max_age,
                filebucket=opts.filebucket_path,
                locks=GroupLocks(self.slots.locker("lock_group"), wait=self.stop.wait),
                upgrader=self.upgrader,
                # upstream kept the WireGuard key in this Secret: adopted once, then the file
                adopt_key=lambda iface: self.node_client.secret_value(
                    f"wg-{iface}-{self.name}", "private-key"
                ),
            ),
            run=functools.partial(apply, work_dir=str(self.runs)),
        )
        self.peers = PeerFilter(self._warn)
        self.pressure = PressureMonitor(self.metrics.pressure, self.name, Path(opts.pressure_dir))
        self.earlyoom = EarlyOom(NodeDrainer(self.clients, self.name).evict_lowest, self._warn)
        self.fencing = FencingAgent(
            Watchdog(
                opts.watchdog_device,
                device_timeout=opts.watchdog_timeout,
                max_timeout=MAX_DEVICE_TIMEOUT,
            ),
            lambda: self.informers["self"].get(self.name),
            lambda: self.dirty.mark("fencing"),
            self.metrics.watchdog_armed,
        )
        self.selftest = PolicySelfTest(
            lambda: missing_policies(self.clients, opts.namespace, self.name),
            self._warn,
            self.metrics.admission_policy_enforced,
        )
        self.informers = {
            # The controller's status summaries must not make every agent reconcile.
            "configsets": self._informer(watches.CONFIGSETS, ignore_status=True),
            "self": self._informer(
                watches.MANAGEDNODES,
                field_selector=f"metadata.name={self.name}",
                on_change=self._self_changed,
            ),
            # Content of staged ConfigSets (spec.rollout): the revision this node was admitted to.
            "revisions": self._informer(watches.CONTROLLERREVISIONS, label_selector=REVISION_LABEL),
        }
        self._self_seen: str | None = None
        self._running: dict[str, str] = {}  # staged ConfigSet -> revision in the last snapshot
        # Only the Secrets and ConfigMaps the selected ConfigSets reference, each by name.
        self.secrets, self.configmaps = (
            NamedWatches(
                kind,
                self.clients,
                opts.namespace,
                self.dirty.mark,
                on_list=lambda k: self.metrics.informer_lists.labels(k).inc(),
            )
            for kind in (watches.SECRETS, watches.CONFIGMAPS)
        )
        self.nodes_informer: Informer | None = None  # started only when a template reads `nodes`
        self.registered = threading.Event()
        # Set when a registration attempt failed: only then is the agent offline. Before the
        # first answer it is merely starting, and says nothing (no false "offline" then "online").
        self.unreachable = threading.Event()
        self.ready = threading.Event()
        self._guarding = threading.Event()  # isolation checks queued or running
        self._guard_full = False  # the queued check includes the policy self-test
        self._threads: list[threading.Thread] = []
        self._disarming: threading.Thread | None = None  # status armed: false, at the signal

    def _warn(self, reason: str, message: str) -> None:
        self.node_client.event(reason, message, warning=True)

    def _guard_later(self, node: dict[str, Any], full: bool) -> None:
        """The isolation checks on the writer thread, one at a time: they talk to the API
        server, and a hung one must not hold drift correction for a request's timeout."""
        self._guard_full = self._guard_full or full  # a queued check becomes a full one
        if self._guarding.is_set():
            return
        self._guarding.set()

        def job() -> None:
            full, self._guard_full = self._guard_full, False
            try:
                self._guard(node, full)
            finally:
                self._guarding.clear()

        self.writer.later(job)

    def _guard(self, node: dict[str, Any], full: bool) -> None:
        """Isolation checks (issue 13): managed labels restored at once; the admission policy
        self-tested at start and with each drift check."""
        changed = drifted(node, self.managed_labels)
        if changed:
            log.warning(
                "managed labels changed on the ManagedNode (%s); restoring", sorted(changed)
            )
            try:
                self.node_client.ensure(self.managed_labels)
            except Exception as e:
                log.warning("cannot restore managed labels: %s", e)
        if full:
            self.selftest.run()

    def _informer(
        self,
        kind: Kind,
        *,
        peers: bool = False,
        on_change: Callable[[str], None] | None = None,
        **kwargs: Any,
    ) -> Informer:
        if on_change is None:
            on_change = functools.partial(self.dirty.mark, peer=True) if peers else self.dirty.mark
        return Informer(
            kind,
            self.clients,
            self.opts.namespace,
            on_change,
            on_list=lambda k: self.metrics.informer_lists.labels(k).inc(),
            **kwargs,
        )

    def _self_changed(self, kind: str) -> None:
        """The own ManagedNode changed. Its status is the agent's own writing: a change there
        only matters to templates reading ``node.status`` and waits like a peer's, or each
        status write (file backups, say) would wake the worker again at once."""
        me = self.informers["self"].get(self.name) or {}
        meta = me.get("metadata") or {}
        wanted = repr((meta.get("labels"), meta.get("annotations"), me.get("spec")))
        if wanted != self._self_seen:
            self._self_seen = wanted
            self.dirty.mark(kind)
        else:
            self.dirty.mark(kind, peer=True)

    # -- threads ---------------------------------------------------------------------------

    def _thread(self, name: str, target: Callable[..., object], *args: object) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _register(self) -> None:
        backoff = Backoff(1, 60)
        while not self.stop.is_set():
            try:
                self.node_client.ensure(self.managed_labels)
                self.registered.set()
                log.info("registered ManagedNode %s/%s", self.opts.namespace, self.name)
                self.dirty.mark("registered")
                return
            except Exception as e:
                if isinstance(e, Forbidden) and self.opts.node_labels and "label" in str(e):
                    self._refuse_labels(e)
                    return
                delay = backoff.next()
                log.warning("cannot register ManagedNode (%s); retrying in %.0f s", e, delay)
                if not self.unreachable.is_set():
                    self.unreachable.set()
                    self.dirty.mark("offline")  # enforce the last applied state meanwhile
                self.stop.wait(delay)

    def _refuse_labels(self, e: Exception) -> None:
        """Custom labels the administrator did not approve are refused by the admission policy
        on every retry: stop with the fix instead of retrying forever."""
        wanted = ",".join(f"{k}={v}" for k, v in sorted(self.opts.node_labels.items()))
        self.fatal = (
            f"--node-labels {wanted} is not approved for {self.name} ({e}); an administrator "
            f"approves it with: nodemanager rbac --hostname {self.name} -n {self.opts.namespace} "
            f"--node-labels {wanted} | kubectl apply -f -"
        )
        log.error("%s", self.fatal)
        self.shutdown()

    def _heartbeat(self) -> None:
        while not self.stop.is_set() and not self.registered.wait(1.0):
            pass
        while not self.stop.is_set():
            if not self.liveness.alive():  # a stuck agent must look dead to the cluster
                log.error(
                    "reconcile stuck %.0f s past the limit: not renewing the Lease",
                    self.liveness.stuck_for(),
                )
            else:
                try:
                    self.node_client.renew_lease()
                    self.fencing.dog.renewed()  # the watchdog is petted while this succeeds
                except Exception as e:
                    log.warning("lease renewal failed: %s", e)
            self.stop.wait(LEASE_PERIOD)

    def _pressure(self) -> None:
        """Sample PSI; a MemoryPressure flip wakes the worker so the status says it at once."""
        was = None
        while True:
            self.pressure.poll()
            me = self.informers["self"].get(self.name) or {}
            now = self.pressure.under_pressure(self._pressure_limit(me))
            if was is not None and now != was:
                self.dirty.mark("pressure")
            was = now
            if self._online():
                try:
                    self.earlyoom.tick(
                        self.pressure.memory_avg10(),
                        settings(me.get("spec") or {}),
                        time.monotonic(),
                    )
                except Exception as e:  # the API or a bad spec: the next sample tries again
                    log.warning("early OOM eviction failed: %s", e)
            if self.stop.wait(PRESSURE_PERIOD):
                return

    def _pressure_limit(self, node: dict[str, Any]) -> float:
        return threshold(node.get("spec") or {}, self.opts.memory_pressure_threshold)

    def _upgrades(self) -> None:
        """spec.upgrade: look every 20 s whether an upgrade is due (agent/upgrade.py)."""
        while not self.stop.wait(UPGRADE_CHECK):
            if not self._online():
                continue
            me = self.informers["self"].get(self.name)
            if not me:
                continue
            try:
                with self.work:
                    changed = self.upgrader.tick(
                        me, on_start=functools.partial(self._upgrading, me)
                    )
                    if not self.upgrader.state.reboot_pending:
                        self.slots.tidy()
            except Exception:
                log.exception("upgrade check failed")
                continue
            if changed:
                self.dirty.mark("upgrade", full=True)

    def _upgrading(self, me: dict[str, Any]) -> None:
        """Show Upgrading=True before the upgrade starts (the worker waits meanwhile)."""
        status: dict[str, Any] = me.get("status") or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        condition = self.upgrader.condition(int(status.get("observedGeneration") or 0))
        conditions = set_condition(status.get("conditions"), condition, now)
        try:
            self.node_client.patch_status({**self.upgrader.status(), "conditions": conditions})
        except Exception as e:
            log.warning("status write failed: %s", e)

    # -- the worker ------------------------------------------------------------------------

    def _online(self) -> bool:
        return (
            self.registered.is_set()
            and all(i.synced.is_set() for i in self.informers.values())
            and (self.nodes_informer is None or self.nodes_informer.synced.is_set())
        )

    def snapshot(self) -> Snapshot | None:
        """The inputs from the live cache, or, before it synced, those last applied (offline)."""
        if not self._online():
            return self._offline_snapshot()
        if self._offline:
            self._offline = False
            log.info("online: API server reachable; applying the live ConfigSets")
        me = self.informers["self"].get(self.name) or {
            "metadata": {"name": self.name, "labels": self.managed_labels}
        }
        configsets, self._running = admitted(
            sorted(self.informers["configsets"].items(), key=lambda c: c["metadata"]["name"]),
            me,
            {r["metadata"]["name"]: r for r in self.informers["revisions"].items()},
        )
        labels = {**((me.get("metadata") or {}).get("labels") or {}), **self.managed_labels}
        secret_names, configmap_names = referenced(configsets, labels)
        self.secrets.want(secret_names)
        self.configmaps.want(configmap_names)
        if not (self.secrets.synced() and self.configmaps.synced()):
            return None  # a new reference: come back once its watch listed it
        snap = Snapshot(
            node=me,
            configsets=configsets,
            secrets=self.secrets.data(),
            configmaps=self.configmaps.data(),
            nodes=self.peers.clean(
                sorted(self.nodes_informer.items(), key=lambda n: n["metadata"]["name"])
            )
            if self.nodes_informer
            else [],
        )
        if self.nodes_informer is None and self.reconciler.uses_nodes(snap):
            self.nodes_informer = self._informer(watches.MANAGEDNODES, peers=True)
            self._thread("informer-managednodes", self.nodes_informer.run, self.stop)
            return None  # come back once every node is in the cache
        return snap

    def _offline_snapshot(self) -> Snapshot | None:
        """Before the cache synced: the state last applied, while the API server cannot be
        reached and this agent never registered (else None: wait for the cache)."""
        stored = self.reconciler.applied.snapshot
        offline = (
            stored
            if stored and not self.registered.is_set() and self.unreachable.is_set()
            else None
        )
        if offline is not None and not self._offline:
            self._offline = True
            log.warning(
                "offline: API server not reachable; enforcing the last applied state "
                "from %s until it returns",
                self.opts.state_dir,
            )
        return offline

    def _patch_status(self, status: Any) -> None:
        self.node_client.patch_status(status)
        self.metrics.status_writes.inc()

    def _write_status(self, status: dict[str, Any], node: dict[str, Any]) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = self.selftest.with_condition(status, node.get("status") or {}, now)
        status = self.pressure.with_status(
            status, node.get("status") or {}, self._pressure_limit(node), now
        )
        status = self.fencing.with_status(status, node.get("status") or {}, node)
        patch = changed(status, node.get("status") or {})
        if not self.registered.is_set() or not patch:
            return
        self.writer.status(patch)

    def reconcile_once(self, full: bool) -> tuple[bool, float | None]:
        """Reconcile now; (whether it could, when to come back)."""
        snap = self.snapshot()
        if snap is None:
            return False, None
        started = time.monotonic()
        with self.work:
            result = self.reconciler.reconcile(snap, full=full)
        if self._online():
            self._guard_later(snap.node, full)
            self._write_status(report(result.status, self._running), snap.node)
            uid = snap.node.get("metadata", {}).get("uid")
            if result.event:
                reason, message, warning = result.event
                self.writer.later(
                    functools.partial(
                        self.node_client.event, reason, message, warning=warning, uid=uid
                    )
                )
            if result.notify:
                self.writer.later(functools.partial(self._notify, result.notify, uid))
        self.ready.set()
        log.info(
            "reconciled in %.3f s (ran ansible: %s, failed: %s)",
            time.monotonic() - started,
            result.ran,
            result.failed,
        )
        return True, result.requeue_after

    def _incomplete(self, e: Exception) -> None:
        """A reconcile that raised enforced nothing: say so where people and probes look,
        instead of leaving the last good Ready=True standing."""
        text = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        why = scrub(stable(text), decoded(self.secrets.data()))
        self.liveness.failed(why)
        self.metrics.reconciled("error")
        me = self.informers["self"].get(self.name)
        if not me or not self._online():
            return
        status: dict[str, Any] = me.get("status") or {}
        generation = int((me.get("metadata") or {}).get("generation") or 0)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        message = printable(f"reconcile cannot complete: {why}")
        conditions = status.get("conditions")
        for type_, value in (("Ready", "False"), ("Degraded", "True")):
            new = {
                "type": type_,
                "status": value,
                "reason": "ReconcileError",
                "message": message,
                "observedGeneration": generation,
            }
            conditions = set_condition(conditions, new, now)
        if conditions != status.get("conditions"):
            self.writer.status({"conditions": conditions})

    def _notify(self, due: Iterable[Notification], uid: str | None) -> None:
        """Annotate each ConfigSet's spec.notifies[] targets: upstream's
        ``nodemanager.io/notify-<configset>: <generation>`` once per generation this agent
        applied (a merge patch: the same value again changes nothing), and with
        ``--notify-on-change`` our ``notified-at``/``-by`` each time it changed this host.

        A failure is a Warning Event naming the field; that target is tried again at the next
        reconcile, the others are not patched again."""
        for n in due:
            cs = n.configset
            ours = {}
            if n.changed and self.opts.notify_on_change:
                ours[NOTIFIED_AT] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                ours[NOTIFIED_BY] = f"{self.name}/{cs.name}@{cs.resource_version}"
            for i, target in enumerate(cs.notifies):
                told = self._notified.get((cs.name, i)) == cs.generation
                annotations = {
                    **({} if told else {notify_key(cs.name): str(cs.generation)}),
                    **ours,
                }
                if not annotations:
                    continue
                try:
                    self.notifier.annotate(
                        target.api_version,
                        target.kind,
                        target.name,
                        target.namespace or self.opts.namespace,
                        annotations,
                    )
                    self._notified[(cs.name, i)] = cs.generation
                except Exception as e:  # one target failing does not stop the others
                    target_name = target.name or "*"  # no name: every object of the kind
                    message = f"{cs.name}: spec.notifies[{i}] {target.kind}/{target_name}: {e}"
                    log.warning("notify failed: %s", message)
                    self.node_client.event("NotifyFailed", message, warning=True, uid=uid)

    def _drift_period(self) -> float:
        """The ManagedNode's spec.reconcilePeriod when set, else --drift-check-interval; 0 means
        event-driven only (no drift checks), as upstream documents."""
        me = self.informers["self"].get(self.name) or {}
        text = (me.get("spec") or {}).get("reconcilePeriod")
        if text:
            try:
                return parse_duration(text)
            except ValueError as e:  # the CRD validates it; an older CRD may not
                log.warning("spec.reconcilePeriod: %s; using --drift-check-interval", e)
        return self.opts.drift_check_interval

    def _clean_leftovers(self) -> None:
        """What a killed agent left: its run dirs (and processes in them), its temp files."""
        try:
            cleanup.clean_runs(self.runs)
            snap = self.reconciler.applied.snapshot
            if snap:
                cleanup.clean_temp_files(cleanup.declared_paths(snap.configsets))
        except OSError as e:
            log.error("cannot clean up after a previous agent: %s", e)

    def run(self) -> None:
        Signals(self.shutdown, self.stopped, lambda: self.dirty.mark("SIGHUP", full=True)).install()
        try:
            self._run()
        finally:
            self.stopped.set()

    def _run(self) -> None:
        self._clean_leftovers()
        servers = [
            serve_metrics(self.opts.metrics_bind_address, self.metrics.registry),
            serve_health(self.opts.health_probe_bind_address, self.ready, self.liveness),
        ]
        self._thread("register", self._register)
        self._thread("lease", self._heartbeat)
        self._thread("writer", self.writer.run, self.stop)
        self._thread("upgrade", self._upgrades)
        self._thread("pressure", self._pressure)
        self._thread("fencing", self.fencing.run, self.stop)
        for name, informer in self.informers.items():
            self._thread(f"informer-{name}", informer.run, self.stop)
        if self.opts.token_renewer:
            self._thread("token-renewer", self.opts.token_renewer.run, self.stop)

        schedule = Schedule.start(
            time.monotonic(), self._drift_period(), self.opts.peer_min_interval
        )
        crashes = Backoff()  # a bug in reconcile must not become a busy loop, nor a fixed wait
        self.dirty.mark("start", full=True)
        while not self.stop.is_set():
            schedule.set_period(self._drift_period())
            self.dirty.wait(schedule.timeout(time.monotonic()))
            if self.stop.is_set():
                break
            asked_full, only_peers = self.dirty.take()
            woke = time.monotonic()
            full = schedule.wake(woke, asked_full, only_peers)
            if full is None:
                continue
            done, requeue = self._reconcile_guarded(full, crashes)
            if not done:
                self.dirty.full = self.dirty.full or full  # the cache will mark dirty once synced
            schedule.ran(
                woke,
                time.monotonic(),
                full=full,
                done=done,
                requeue=requeue,
                period=self._drift_period(),
                jitter=random.uniform(0.9, 1.1),
            )
        self._stop_all(servers)

    def _reconcile_guarded(self, full: bool, crashes: Backoff) -> tuple[bool, float | None]:
        """One reconcile; a crash (a bug) is logged and retried with backoff."""
        self.liveness.busy()
        try:
            done, requeue = self.reconcile_once(full)
            crashes.reset()
            if done:
                self.liveness.completed()
            return done, requeue
        except Exception as e:
            requeue = crashes.next()
            log.exception("reconcile failed; retrying in %.0f s", requeue)
            try:
                self._incomplete(e)
            except Exception:  # saying so must never stop the worker
                log.exception("cannot report the failed reconcile")
            return True, requeue
        finally:
            self.liveness.idle()

    def _stop_all(self, servers: list[Any]) -> None:
        self.secrets.stop()
        self.configmaps.stop()
        if self._disarming is not None:  # a thread left writing at exit can abort Python
            self._disarming.join(timeout=5)
        self._say_disarmed(next((t for t in self._threads if t.name == "writer"), None))
        for server in servers:
            if server:
                server.shutdown()
                server.server_close()
        self.clients.close()
        log.info("stopped")

    def _say_disarmed(self, after: threading.Thread | None = None) -> None:
        """A cleanly stopped agent says its watchdog is disarmed (best effort), so the
        controller does not fence a host that runs on without it. Once at the signal (the
        worker may outlast the grace period) and again after the writer's last status."""
        if after is not None:
            after.join(timeout=5)
        me = self.informers["self"].get(self.name) or {}
        if "fencing" in (me.get("status") or {}):  # the cache stopped: it may lag the server
            try:
                self.node_client.patch_status({"fencing": self.fencing.report().to_raw()})
            except Exception as e:
                log.warning("cannot say the watchdog is disarmed: %s", e)

    def shutdown(self) -> None:
        """SIGTERM: disarm the watchdog at once, finish the reconcile in progress (never leave
        a file half-written), then exit; the signal reader ends the process if that takes
        longer than its grace period."""
        self.fencing.close()
        self._disarming = threading.Thread(target=self._say_disarmed, name="disarmed", daemon=True)
        self._disarming.start()
        self.stop.set()
        self.dirty.mark("stop")
