"""Scheduled OS upgrades (ManagedNode ``spec.upgrade``), with upstream's semantics:

- ``schedule`` (cron) names the minutes an upgrade may start; ``delay`` is the least time
  between two upgrades; the annotation ``upgrade.nodemanager/hold`` pauses them.
- ``group`` is a Lease in the namespace: a node upgrades only while it holds it, so one node
  of the group upgrades at a time; one that finds it held skips that slot. The Lease lasts
  UPGRADE_LEASE seconds and is renewed while the upgrade runs (``Renewal``), so a long upgrade
  keeps it and a crashed agent's expires soon; before a reboot it is renewed for REBOOT_LEASE
  seconds, and given back when the agent comes back up.
- When a Kubernetes Node of the host's name exists (``kube/drain.py``), it is cordoned and
  drained before the upgrade and uncordoned after it (after the reboot, if one), only when this
  agent cordoned it; ``status.kubernetesNodeCordoned`` says since when (upstream's field). Pods
  still there at the drain timeout do not stop the upgrade (upstream's choice); the message says
  which.
- The upgrade is one task through the family's Ansible module (``playbook/upgrade.py``). When it
  requires a reboot (``host/reboot.py``), the agent records that, then reboots.

The outcome is kept in ``<state_dir>/upgrade.json`` (it must survive the reboot) and reported as
``status.lastUpgrade`` and the ``Upgrading`` condition.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nodemanager.agent.cron import Cron
from nodemanager.agent.grouplocks import Locker, Renewal
from nodemanager.agent.metrics import Metrics
from nodemanager.api import parse_duration
from nodemanager.api.duration import MAX_LEASE_SECONDS
from nodemanager.executor.errors import ExecutorError
from nodemanager.executor.run import RunResult, execute
from nodemanager.fsutil import write_atomic
from nodemanager.host.reboot import installed_kernels, reboot_command, reboot_required
from nodemanager.kube.drain import DrainStopped
from nodemanager.playbook import platforms
from nodemanager.playbook.build import Plan
from nodemanager.playbook.upgrade import upgrade_plan

log = logging.getLogger(__name__)
HOLD = "upgrade.nodemanager/hold"
UPGRADE_LEASE = 300  # seconds; renewed every third of it while the upgrade runs
REBOOT_LEASE = MAX_LEASE_SECONDS  # the group stays held for a reboot (no agent renews it then)


class Drainer(Protocol):
    """The Kubernetes Node named like this host (``kube/drain.py``)."""

    def cordon(self) -> bool | None: ...

    def drain(self, timeout: float) -> list[str]: ...

    def uncordon(self) -> None: ...


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def parse_time(value: object) -> float | None:
    """An RFC 3339 time as stored in status (Go's metav1.Time), or None."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class UpgradeSpec:
    schedule: Cron
    delay: float
    group: str | None

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> UpgradeSpec | None:
        """None when the node has no schedule; ValueError naming the field when invalid."""
        if not raw or not raw.get("schedule"):
            return None
        try:
            schedule = Cron.parse(str(raw["schedule"]))
        except ValueError as e:
            raise ValueError(f"spec.upgrade.schedule: {e}") from None
        if raw.get("delay") in (None, ""):  # upstream: no delay, no upgrade
            raise ValueError(
                'spec.upgrade.delay: required with a schedule, as upstream ("0" for none)'
            )
        try:
            delay = parse_duration(str(raw["delay"]))
        except ValueError as e:
            raise ValueError(f"spec.upgrade.delay: {e}") from None
        return cls(schedule, delay, str(raw["group"]) if raw.get("group") else None)


def not_due(spec: UpgradeSpec, *, held: bool, last: float | None, now: float) -> str | None:
    """Why no upgrade starts at ``now``, or None when one is due."""
    if held:
        return f"held by the {HOLD} annotation"
    # Host-local time, as upstream's cronexpr over time.Now().
    if not spec.schedule.matches(dt.datetime.fromtimestamp(now)):
        return "not a minute of spec.upgrade.schedule"
    if last is not None and (now - last < spec.delay or int(now // 60) == int(last // 60)):
        return "within spec.upgrade.delay of the last upgrade"
    return None


@dataclass
class UpgradeState:
    last_upgrade: float | None = None
    last_attempt: float | None = None  # failed ones too: the delay applies, no retry storm
    result: str = ""  # Succeeded | Failed | RebootPending
    message: str = ""
    reboot_pending: bool = False
    group: str | None = None  # the Lease held through the reboot
    cordoned: float | None = None  # when this agent cordoned the Kubernetes Node
    kernels: list[str] = field(default_factory=list)
    adopted: bool = False  # upstream's lastUpgrade and cordon marker read from status (once)


class Upgrader:
    def __init__(
        self,
        *,
        name: str,
        family: str,
        state_dir: str,
        metrics: Metrics,
        locker: Locker | None = None,
        drainer: Drainer | None = None,
        drain_timeout: float = 600.0,
        run: Callable[[Plan], RunResult] = execute,
        reboot: list[str] | None = None,
        clock: Callable[[], float] = time.time,
        pooled: bool = False,
    ):
        """``pooled``: ``locker`` also hands out the pool's slot (agent/poolslot.py), so an
        upgrade without a group asks it too (name "": the slot, no Lease)."""
        self.name, self.family, self.metrics, self.locker = name, family, metrics, locker
        self.pooled = pooled
        self.asked: str | None = None  # a slot or Lease asked for and refused: withdrawn when
        # the upgrade is no longer due, so a slot granted later is not held for nothing
        self.path = Path(state_dir) / "upgrade.json"
        self.run, self.clock = run, clock
        self.drainer, self.drain_timeout = drainer, drain_timeout
        self.renewal: Renewal | None = None
        self.reboot = reboot or reboot_command()
        self.state = self._load()
        self.metrics.cordoned.labels(self.metrics.node or name).set(self.state.cordoned or 0)
        self.upgrading = False

    def _load(self) -> UpgradeState:
        try:
            return UpgradeState(**json.loads(self.path.read_text()))
        except FileNotFoundError:
            return UpgradeState()
        except (OSError, ValueError, TypeError) as e:
            log.warning("ignoring unreadable %s: %s", self.path, e)
            return UpgradeState()

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(asdict(self.state)).encode(), mode=0o600)

    def returned(self) -> bool:
        """After the reboot an upgrade asked for: uncordon, give the group Lease back. Also
        after an agent died mid-upgrade: uncordon what it cordoned. Whether it did either (when
        the uncordon fails, upgrades go on: the next one uncordons after it)."""
        if not self.state.reboot_pending:
            if self.state.cordoned is None:
                return False
            self._release()
            self._save()
            return self.state.cordoned is None
        log.info("back from the reboot after the upgrade")
        self._release()
        self.state.reboot_pending, self.state.result = False, "Succeeded"
        self.state.message = "upgraded and rebooted"
        self._save()
        return True

    def adopt(self, node: Mapping[str, Any]) -> None:
        """Once per state dir: take over what upstream's agent stored in status, so a migrated
        node keeps its delay (``lastUpgrade``) and a Node upstream cordoned for an upgrade is
        uncordoned (``kubernetesNodeCordoned``: upstream's marker, the same field as ours)."""
        if self.state.adopted:
            return
        status = node.get("status") or {}
        last = parse_time(status.get("lastUpgrade"))
        if last is not None and (self.state.last_upgrade or 0) < last:
            self.state.last_upgrade = last
        cordoned = parse_time(status.get("kubernetesNodeCordoned"))
        if cordoned is not None and self.state.cordoned is None:
            log.info("adopting the cordon of Kubernetes Node %s recorded in status", self.name)
            self.state.cordoned = cordoned
        self.state.adopted = True
        self._save()

    def tick(self, node: Mapping[str, Any], on_start: Callable[[], None] = lambda: None) -> bool:
        """Upgrade now if due; whether the state changed (status to rewrite)."""
        self.adopt(node)
        if self.returned():
            return True
        meta = node.get("metadata") or {}
        try:
            spec = UpgradeSpec.parse((node.get("spec") or {}).get("upgrade"))
        except ValueError as e:
            changed = self.state.message != str(e)
            self.state.result, self.state.message = "Failed", str(e)
            return changed
        if spec is None:
            return False
        refused = platforms.unsupported(self.family)
        if refused:
            changed = self.state.message != f"spec.upgrade: {refused}"
            self.state.result, self.state.message = "Failed", f"spec.upgrade: {refused}"
            return changed
        now = self.clock()
        held = HOLD in (meta.get("annotations") or {})
        tries = [t for t in (self.state.last_upgrade, self.state.last_attempt) if t is not None]
        reason = not_due(spec, held=held, last=max(tries) if tries else None, now=now)
        if reason:
            log.debug("no upgrade: %s", reason)
            self._withdraw()
            return False
        slot = spec.group or ("" if self.pooled else None)
        if slot is not None and self.locker:
            holder = self.locker.try_acquire(slot, UPGRADE_LEASE)
            if holder is not None:
                log.info("upgrade %s is held by %s; skipping this slot", slot or "slot", holder)
                self.asked = slot
                return False
            self.asked = None
            self.state.group = slot
            self.renewal = Renewal(self.locker, [slot], UPGRADE_LEASE)
        self.upgrading = True
        try:
            left = self._cordon(now)
            if left is not None:
                on_start()
                self._upgrade(now, left)
        finally:
            self.upgrading = False
            if self.renewal is not None:  # still set: something raised
                self._release()
        return True

    def _cordon(self, now: float) -> list[str] | None:
        """Cordon and drain the Kubernetes Node if there is one: the pods left, or None when
        it could not be cordoned (the upgrade is not started then)."""
        if self.drainer is None:
            return []
        try:
            if self.drainer.cordon():
                self.state.cordoned = self.clock()
                self.metrics.cordoned.labels(self.metrics.node or self.name).set(self.clock())
                self._save()  # an agent that dies from here on uncordons when it starts again
            elif self.state.cordoned is None:
                return []  # no Node, or an administrator's cordon: not ours to drain or undo
            return self.drainer.drain(self.drain_timeout)
        except DrainStopped:  # not a failed upgrade: the next start tries again
            log.info("stopping: no upgrade now")
            self._release()
            self._save()
            return None
        except Exception as e:  # counted as a failed upgrade, as upstream does
            log.warning("cannot cordon and drain the Kubernetes Node: %s", e)
            self.metrics.upgrades.labels(self.metrics.node or self.name, "error").inc()
            self.state.result = "Failed"
            self.state.message = f"cordon and drain of Kubernetes Node {self.name}: {e}"[:1000]
            self.state.last_attempt = now
            self._release()
            self._save()
            return None

    def _upgrade(self, now: float, left: list[str]) -> None:
        kernels = installed_kernels()
        undrained = f"; pods not drained in time: {', '.join(left[:20])}" if left else ""
        started = time.monotonic()
        log.info("upgrading the OS (%s)", self.family)
        try:
            result = self.run(upgrade_plan(self.family, self.name))
            message = "; ".join(r.message for r in result.results if r.message) or (
                result.breakdown() if result.failed else ""
            )
            failed = result.failed
        except ExecutorError as e:
            failed, message = True, str(e)
        node = self.metrics.node or self.name
        self.metrics.upgrade_duration.labels(node).observe(time.monotonic() - started)
        self.metrics.upgrades.labels(node, "error" if failed else "success").inc()
        if failed:
            log.warning("upgrade failed: %s", message)
            self.state.result, self.state.message = "Failed", (message + undrained)[:1000]
            self.state.last_attempt = now
            self._release()
            self._save()
            return
        self.state.last_upgrade = self.clock()
        self.metrics.last_upgrade.labels(node).set(self.state.last_upgrade)
        why = reboot_required(kernels)
        if why is None:
            self.state.result = "Succeeded"
            self.state.message = ("upgraded; no reboot needed" + undrained)[:1000]
            self._release()
            self._save()
            return
        self.state.result, self.state.message = "RebootPending", f"rebooting: {why}"
        self.state.reboot_pending, self.state.kernels = True, sorted(kernels)
        self._stop_renewal()
        if self.state.group and self.locker:  # the reboot gets its own, longer, term
            try:
                self.locker.try_acquire(self.state.group, REBOOT_LEASE)
            except Exception as e:
                log.warning("could not extend upgrade group %s: %s", self.state.group, e)
        self._save()  # before the reboot: the agent must know on its way back up
        log.info("upgrade needs a reboot (%s): %s", why, " ".join(self.reboot))
        proc = subprocess.run(self.reboot, capture_output=True, text=True)
        if proc.returncode != 0:
            self.state.reboot_pending, self.state.result = False, "Failed"
            self.state.message = f"{' '.join(self.reboot)} exited {proc.returncode}"
            self._release()
            self._save()

    def _stop_renewal(self) -> None:
        if self.renewal is not None:
            self.renewal.stop()
            self.renewal = None

    def _release(self) -> None:
        """The upgrade is over: uncordon what we cordoned, give the group Lease back."""
        self._stop_renewal()
        if self.state.cordoned is not None and self.drainer is not None:
            try:
                self.drainer.uncordon()
                self.state.cordoned = None
                self.metrics.cordoned.labels(self.metrics.node or self.name).set(0)
            except Exception as e:  # kept: retried on the next upgrade check
                log.warning("could not uncordon the Kubernetes Node: %s", e)
        if self.state.group is not None and self.locker:
            try:
                self.locker.release(self.state.group)
            except Exception as e:  # it expires on its own
                log.warning("could not release upgrade group %s: %s", self.state.group, e)
        self.state.group = None

    def _withdraw(self) -> None:
        if self.asked is None or self.locker is None:
            return
        try:
            self.locker.release(self.asked)
            self.asked = None
        except Exception as e:  # the next check tries again
            log.warning("could not withdraw the upgrade's request: %s", e)

    # -- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        last, cordoned = self.state.last_upgrade, self.state.cordoned
        out: dict[str, Any] = {"lastUpgrade": rfc3339(last)} if last else {}
        # None deletes the field from the stored status (a merge patch).
        out["kubernetesNodeCordoned"] = rfc3339(cordoned) if cordoned else None
        return out

    def condition(self, generation: int) -> dict[str, Any]:
        """The Upgrading condition (without its time: ``set_condition`` carries that over):
        True while an upgrade or its reboot is under way."""
        active = self.upgrading or self.state.reboot_pending
        reason = "Upgrading" if self.upgrading else (self.state.result or "NoUpgrade")
        return {
            "type": "Upgrading",
            "status": "True" if active else "False",
            "reason": reason,
            "message": self.state.message[:2048],
            "observedGeneration": generation,
        }
