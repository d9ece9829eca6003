"""Upgrade scheduling: cron, delay, hold; and the outcome kept across a reboot (with a real
upgrade run replaced by a recorded RunResult: the real one is in tests/integration)."""

import datetime as dt

import pytest

from nodemanager.agent.cron import Cron
from nodemanager.agent.metrics import Metrics
from nodemanager.agent.upgrade import HOLD, Upgrader, UpgradeSpec, not_due
from nodemanager.executor.events import TaskResult
from nodemanager.executor.run import RunResult
from nodemanager.host.reboot import reboot_required


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "expr, yes, no",
    [
        ("* * * * *", "2026-01-05T03:04", None),
        ("*/15 2-4 * * *", "2026-01-05T03:30", "2026-01-05T03:31"),
        ("0 3 * * sun", "2026-01-04T03:00", "2026-01-05T03:00"),  # 4 Jan 2026 is a Sunday
        ("0 3 * * 7", "2026-01-04T03:00", "2026-01-06T03:00"),
        ("0 0 1 jan *", "2026-01-01T00:00", "2026-02-01T00:00"),
        ("0 0 13 * fri", "2026-02-13T00:00", "2026-02-14T00:00"),  # day OR weekday
        ("@daily", "2026-03-01T00:00", "2026-03-01T00:01"),
        ("5,10 * * * *", "2026-03-01T07:10", "2026-03-01T07:11"),
    ],
)
def test_cron_matches(expr, yes, no):
    cron = Cron.parse(expr)
    assert cron.matches(at(yes))
    if no:
        assert not cron.matches(at(no))


@pytest.mark.parametrize(
    "expr", ["* * * *", "60 * * * *", "* * * 13 *", "a * * * *", "*/0 * * * *"]
)
def test_bad_cron_is_an_error_naming_the_field(expr):
    with pytest.raises(ValueError, match="spec.upgrade.schedule"):
        UpgradeSpec.parse({"schedule": expr})


def test_due_respects_schedule_delay_and_hold():
    spec = UpgradeSpec.parse({"schedule": "0 * * * *", "delay": "2h", "group": "g"})
    assert spec and spec.group == "g" and spec.delay == 7200
    now = at("2026-01-05T10:00").timestamp()
    assert not_due(spec, held=False, last=None, now=now) is None
    assert "schedule" in (not_due(spec, held=False, last=None, now=now + 60) or "")
    assert "delay" in (not_due(spec, held=False, last=now - 3600, now=now) or "")
    assert not_due(spec, held=False, last=now - 7200, now=now) is None
    assert HOLD in (not_due(spec, held=True, last=None, now=now) or "")
    assert UpgradeSpec.parse({}) is None and UpgradeSpec.parse({"delay": "1h"}) is None
    with pytest.raises(ValueError, match="spec.upgrade.delay"):
        UpgradeSpec.parse({"schedule": "* * * * *", "delay": "soon"})


class Locker:
    def __init__(self, holder=None):
        self.holder, self.calls = holder, []

    def try_acquire(self, name, duration_seconds=300):
        self.calls.append(("acquire", name))
        return self.holder

    def release(self, name):
        self.calls.append(("release", name))


def node(**annotations):
    return {
        "metadata": {"name": "n", "annotations": annotations},
        "spec": {"upgrade": {"schedule": "* * * * *", "delay": "1h", "group": "g"}},
    }


def ok_run(plan):
    (name,) = plan.origins
    return RunResult("successful", 0, (TaskResult(name, "upgrade:os", (), "changed"),))


def upgrader(
    tmp_path, run=ok_run, locker=None, clock=lambda: 1_800_000_000.0, reboot=("true",), drainer=None
):
    return Upgrader(
        drainer=drainer,
        name="n",
        family="debian",
        state_dir=str(tmp_path),
        metrics=Metrics(node="n"),
        locker=locker,
        run=run,
        reboot=list(reboot),
        clock=clock,
    )


def test_upgrade_runs_the_family_task_records_it_and_releases_the_group(tmp_path):
    plans = []
    locker = Locker()
    u = upgrader(tmp_path, run=lambda p: (plans.append(p), ok_run(p))[1], locker=locker)
    assert u.tick(node())
    ((task,),) = [b["block"] for b in plans[0].playbook[0]["tasks"]]
    assert task["ansible.builtin.apt"] == {"update_cache": True, "upgrade": "full"}
    assert u.status() == {"lastUpgrade": "2027-01-15T08:00:00Z", "kubernetesNodeCordoned": None}
    assert locker.calls == [("acquire", "g"), ("release", "g")]
    assert not u.tick(node())  # within the delay
    assert upgrader(tmp_path).state.last_upgrade == 1_800_000_000.0  # kept on disk
    metrics = u.metrics.registry.get_sample_value
    assert metrics("nodemanager_upgrade_total", {"node": "n", "result": "success"}) == 1
    assert metrics("nodemanager_last_upgrade_timestamp_seconds", {"node": "n"}) == 1_800_000_000.0


def test_hold_and_a_busy_group_prevent_the_upgrade(tmp_path):
    plans = []
    u = upgrader(tmp_path, run=lambda p: plans.append(p), locker=Locker())
    assert not u.tick(node(**{HOLD: ""}))
    u = upgrader(tmp_path, run=lambda p: plans.append(p), locker=Locker(holder="other"))
    assert not u.tick(node())
    assert plans == []


def test_failed_upgrade_is_reported_and_waits_for_the_delay(tmp_path):
    def failing(plan):
        (name,) = plan.origins
        return RunResult(
            "successful", 0, (TaskResult(name, "upgrade:os", (), "failed", message="E: broken"),)
        )

    u = upgrader(tmp_path, run=failing, locker=Locker())
    assert u.tick(node())
    cond = u.condition(1)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Failed", "E: broken")
    assert u.status() == {"kubernetesNodeCordoned": None}
    assert not u.tick(node())  # a failure is not retried before the delay


def test_reboot_when_required_then_the_group_is_released_on_return(tmp_path, monkeypatch):
    marker = tmp_path / "rebooted"
    monkeypatch.setattr("nodemanager.agent.upgrade.reboot_required", lambda kernels: "flag")
    locker = Locker()
    u = upgrader(tmp_path, locker=locker, reboot=("touch", str(marker)))
    assert u.tick(node())
    assert marker.exists()
    # Held through the reboot: taken, then extended to REBOOT_LEASE before it.
    assert locker.calls == [("acquire", "g"), ("acquire", "g")]
    cond = u.condition(1)
    assert (cond["status"], cond["reason"]) == ("True", "RebootPending")
    back = upgrader(tmp_path, locker=locker)  # the agent after the reboot
    assert back.tick(node())
    assert locker.calls[-1] == ("release", "g")
    assert back.condition(1)["reason"] == "Succeeded"


def test_reboot_required_signs(tmp_path):
    (tmp_path / "lib" / "modules" / "6.1.0-1").mkdir(parents=True)
    before = frozenset({"6.1.0-1"})
    assert reboot_required(before, root=str(tmp_path)) is None
    (tmp_path / "lib" / "modules" / "6.1.0-2").mkdir()
    assert "6.1.0-2" in (reboot_required(before, root=str(tmp_path)) or "")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "reboot-required").write_text("")
    assert "reboot-required" in (reboot_required(before, root=str(tmp_path)) or "")


class Drainer:
    """Records calls; the real one is tested on the API server in tests/cluster/test_drain.py."""

    def __init__(self, log, cordon=True, left=(), fail=None):
        self.log, self.answer, self.fail = log, cordon, fail
        self.left = left if isinstance(left, Exception) else list(left)

    def cordon(self):
        self.log.append("cordon")
        if self.fail:
            raise self.fail
        return self.answer

    def drain(self, timeout):
        self.log.append("drain")
        if isinstance(self.left, Exception):
            raise self.left
        return self.left

    def uncordon(self):
        self.log.append("uncordon")


def test_cordon_drain_upgrade_uncordon_in_order_with_the_status_field(tmp_path):
    log, seen = [], []

    def run(plan):
        log.append("upgrade")
        seen.append(u.status()["kubernetesNodeCordoned"])
        return ok_run(plan)

    u = upgrader(tmp_path, run=run, locker=Locker(), drainer=Drainer(log, left=["ns/p"]))
    assert u.tick(node())
    assert log == ["cordon", "drain", "upgrade", "uncordon"]
    assert seen == ["2027-01-15T08:00:00Z"]  # recorded while cordoned
    assert u.status()["kubernetesNodeCordoned"] is None
    assert "pods not drained in time: ns/p" in u.condition(1)["message"]


def test_a_node_cordoned_by_an_administrator_is_neither_drained_nor_uncordoned(tmp_path):
    log = []
    u = upgrader(tmp_path, locker=Locker(), drainer=Drainer(log, cordon=False))
    assert u.tick(node())
    assert log == ["cordon"]


def test_no_upgrade_when_the_cordon_fails_and_the_group_is_released(tmp_path):
    log, plans, locker = [], [], Locker()
    d = Drainer(log, fail=RuntimeError("API down"))
    u = upgrader(tmp_path, run=lambda p: plans.append(p), locker=locker, drainer=d)
    assert u.tick(node())
    assert plans == [] and locker.calls[-1] == ("release", "g")
    assert "cordon and drain of Kubernetes Node n: API down" in u.condition(1)["message"]
    failed = {"node": "n", "result": "error"}
    assert u.metrics.registry.get_sample_value("nodemanager_upgrade_total", failed) == 1


def test_after_a_reboot_and_after_a_crash_the_node_is_uncordoned(tmp_path, monkeypatch):
    monkeypatch.setattr("nodemanager.agent.upgrade.reboot_required", lambda kernels: "flag")
    log = []
    u = upgrader(tmp_path, locker=Locker(), drainer=Drainer(log))
    assert u.tick(node())
    assert log == ["cordon", "drain"]  # rebooting, still cordoned
    assert u.status()["kubernetesNodeCordoned"]
    back = upgrader(tmp_path, locker=Locker(), drainer=Drainer(log))
    assert back.tick(node(**{HOLD: ""}))  # the hold stops upgrades, not the return
    assert log[-1] == "uncordon" and back.status()["kubernetesNodeCordoned"] is None
    # An agent killed mid-upgrade: upgrade.json says cordoned, no reboot pending.
    back.state.cordoned = 1.0
    back._save()
    again = upgrader(tmp_path, locker=Locker(), drainer=Drainer(log))
    assert again.tick(node(**{HOLD: ""})) and log[-1] == "uncordon"


def test_stopping_during_the_drain_uncordons_and_leaves_the_upgrade_for_later(tmp_path):
    from nodemanager.kube.drain import DrainStopped

    log, plans, locker = [], [], Locker()
    d = Drainer(log, left=DrainStopped("stopping"))
    u = upgrader(tmp_path, run=lambda p: plans.append(p), locker=locker, drainer=d)
    gauge = u.metrics.registry.get_sample_value
    u.tick(node())
    assert plans == [] and log == ["cordon", "drain", "uncordon"]
    assert locker.calls[-1] == ("release", "g")
    assert u.state.last_attempt is None  # not a failure: the next start may upgrade at once
    assert gauge("nodemanager_kubernetes_node_cordoned_timestamp_seconds", {"node": "n"}) == 0


def test_the_cordon_metric_follows_the_cordon(tmp_path, monkeypatch):
    monkeypatch.setattr("nodemanager.agent.upgrade.reboot_required", lambda kernels: "flag")
    u = upgrader(tmp_path, locker=Locker(), drainer=Drainer([]))
    u.tick(node())  # rebooting: still cordoned
    name = "nodemanager_kubernetes_node_cordoned_timestamp_seconds"
    assert u.metrics.registry.get_sample_value(name, {"node": "n"}) == 1_800_000_000.0
    back = upgrader(tmp_path, locker=Locker(), drainer=Drainer([]))
    assert back.metrics.registry.get_sample_value(name, {"node": "n"}) == 1_800_000_000.0
    back.tick(node())
    assert back.metrics.registry.get_sample_value(name, {"node": "n"}) == 0


def test_a_failing_uncordon_after_a_crash_does_not_block_upgrades(tmp_path):
    class Refusing(Drainer):
        def uncordon(self):
            self.log.append("uncordon")
            raise RuntimeError("403")

    log, plans = [], []
    u = upgrader(tmp_path, run=lambda p: (plans.append(p), ok_run(p))[1], locker=Locker())
    u.state.cordoned = 1.0  # left by an agent killed mid-upgrade
    u._save()
    u = upgrader(
        tmp_path,
        run=lambda p: (plans.append(p), ok_run(p))[1],
        locker=Locker(),
        drainer=Refusing(log, cordon=False),
    )
    assert u.tick(node())
    assert len(plans) == 1  # upgraded; still ours to uncordon, tried again after it
    assert log == ["uncordon", "cordon", "drain", "uncordon"]
    assert u.status()["kubernetesNodeCordoned"]


# -- upstream's meaning (internal/controller/common/managednode_controller.go) -----------------


def test_a_schedule_without_delay_upgrades_nothing_and_says_why_as_upstream(tmp_path):
    with pytest.raises(ValueError, match=r'spec.upgrade.delay: required .* \("0" for none\)'):
        UpgradeSpec.parse({"schedule": "* * * * *"})
    spec = UpgradeSpec.parse({"schedule": "* * * * *", "delay": "0"})
    assert spec is not None and spec.delay == 0
    plans = []
    u = upgrader(tmp_path, run=lambda p: plans.append(p))
    no_delay = {"metadata": {"name": "n"}, "spec": {"upgrade": {"schedule": "* * * * *"}}}
    assert u.tick(no_delay) and plans == []
    assert "spec.upgrade.delay: required" in u.state.message


def test_the_schedule_is_read_in_host_local_time_as_upstream(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Europe/Paris")  # UTC+1 in January
    time.tzset()
    try:
        spec = UpgradeSpec.parse({"schedule": "0 3 * * *", "delay": "1h"})
        three_local = at("2026-01-05T02:00").timestamp()  # 02:00 UTC is 03:00 in Paris
        assert not_due(spec, held=False, last=None, now=three_local) is None
        assert not_due(spec, held=False, last=None, now=three_local + 3600) is not None
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_upstreams_last_upgrade_in_status_holds_the_delay(tmp_path):
    plans = []
    u = upgrader(tmp_path, run=lambda p: plans.append(p))
    me = node()
    me["status"] = {"lastUpgrade": "2027-01-15T07:30:00Z"}  # 30 min before the clock; delay 1h
    assert not u.tick(me) and plans == []
    assert u.status()["lastUpgrade"] == "2027-01-15T07:30:00Z"  # reported, not dropped


def test_a_node_upstream_cordoned_is_uncordoned_once(tmp_path):
    log = []
    u = upgrader(tmp_path, drainer=Drainer(log))
    stored = {
        "metadata": {"name": "n"},
        "status": {"kubernetesNodeCordoned": "2027-01-15T07:00:00Z"},
    }
    u.adopt(stored)
    assert u.status()["kubernetesNodeCordoned"] == "2027-01-15T07:00:00Z"  # not dropped first
    u.tick(stored)
    assert log == ["uncordon"] and u.status()["kubernetesNodeCordoned"] is None
    again = upgrader(tmp_path, drainer=Drainer(log))  # a restart before the status was written
    again.tick(stored)
    assert log == ["uncordon"]  # adopted once: a later cordon by an administrator stays


def test_pooled_upgrade_without_a_group_asks_for_the_slot_and_withdraws_when_not_due(tmp_path):
    """With the pool's slots (agent/poolslot.py) behind the locker, an upgrade without a group
    asks for a slot (name ""); refused, it is withdrawn once the upgrade is no longer due."""
    plans, locker = [], Locker(holder="the budget of pool default")
    now = [at("2026-01-05T10:00").timestamp()]
    u = Upgrader(
        name="n",
        family="debian",
        state_dir=str(tmp_path),
        metrics=Metrics(node="n"),
        locker=locker,
        run=lambda p: (plans.append(p), ok_run(p))[1],
        reboot=["true"],
        clock=lambda: now[0],
        pooled=True,
    )
    hourly = {
        "metadata": {"name": "n"},
        "spec": {"upgrade": {"schedule": "0 * * * *", "delay": "0"}},
    }
    assert not u.tick(hourly) and plans == []
    assert locker.calls == [("acquire", "")]
    now[0] += 60  # the scheduled minute passed: the request goes
    assert not u.tick(hourly) and locker.calls[-1] == ("release", "")
    locker.holder = None  # granted at the next scheduled minute: upgrade, then the slot back
    now[0] += 3540
    assert u.tick(hourly) and len(plans) == 1
    assert locker.calls[-2:] == [("acquire", ""), ("release", "")]
