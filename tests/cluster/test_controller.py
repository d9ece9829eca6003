"""The fleet controller on the real control plane with five real agents (own --hostname and
--state-dir each): ConfigSet status, coalesced writes, stale nodes, per-node Secret access,
leader failover."""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, watch

from nodemanager.controller.rollout import revision_name
from tests.cluster.agent import Agent
from tests.cluster.controller import ControllerProcess
from tests.cluster.fleet import make_namespace, rewatch, start_agents, start_controller
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import GROUP, VERSION, condition, put_configset

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]
HOSTS = [f"fleet-{i}" for i in range(5)]
SYNC_PERIOD = 1.0


@pytest.fixture(scope="module")
def fleet_ns(control_plane) -> str:
    return make_namespace(str(control_plane.kubeconfig), "fleet")


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fleet")


@pytest.fixture(scope="module")
def agents(kubeconfig, fleet_ns, fleet_dir) -> Iterator[dict[str, Agent]]:
    started: dict[str, Agent] = {}
    try:
        # fleet-0 has no color
        labels = {h: "role=web,color=blue" if i else "role=web" for i, h in enumerate(HOSTS)}
        start_agents(kubeconfig, fleet_ns, fleet_dir, labels, started)
        yield started
    finally:
        for a in started.values():
            a.stop()


@pytest.fixture(scope="module")
def controller(kubeconfig, fleet_ns, fleet_dir, agents) -> Iterator[ControllerProcess]:
    c = start_controller(kubeconfig, fleet_ns, fleet_dir, SYNC_PERIOD)
    yield c
    assert c.stop() == 0


@pytest.fixture
def api(kubeconfig) -> Iterator[client.ApiClient]:
    a = config.new_client_from_config(kubeconfig)
    yield a
    a.close()


def get(api, ns, plural, name) -> dict[str, Any]:
    return client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, plural, name
    )


def configset_events(api, ns, name) -> dict[str, list[client.CoreV1Event]]:
    """The Events on a ConfigSet, by reason."""
    found: dict[str, list[client.CoreV1Event]] = {}
    for e in (
        client.CoreV1Api(api)
        .list_namespaced_event(
            ns, field_selector=f"involvedObject.kind=ConfigSet,involvedObject.name={name}"
        )
        .items
    ):
        found.setdefault(e.reason, []).append(e)
    return found


def cond(obj, type_):
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), {}
    )


class StatusWatch:
    """Every status a ConfigSet gets, with the time it arrived (a real watch)."""

    def __init__(self, api, ns, name):
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._w = watch.Watch()
        self._t = threading.Thread(target=self._run, args=(api, ns, name), daemon=True)
        self._t.start()

    def _run(self, api, ns, name):
        rewatch(lambda: self._stream(api, ns, name), self._stop)

    def _stream(self, api, ns, name):
        custom = client.CustomObjectsApi(api)
        for event in self._w.stream(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            ns,
            "configsets",
            field_selector=f"metadata.name={name}",
            timeout_seconds=300,
        ):
            status = event["object"].get("status")
            if status and (not self.seen or self.seen[-1][1] != status):
                self.seen.append((time.monotonic(), status))
            if self._stop.is_set():
                return

    def stop(self):
        self._stop.set()
        self._w.stop()
        self._t.join(timeout=0)


def test_configset_status_counts_updated_failed_and_coalesces_writes(
    api, fleet_ns, fleet_dir, agents, controller
):
    target = fleet_dir / "motd"
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "files": [{"path": str(target), "content": "v1\n"}],
    }
    started = time.monotonic()
    put_configset(api, fleet_ns, "motd", spec)
    watcher = StatusWatch(api, fleet_ns, "motd")
    try:

        def all_updated():
            cs = get(api, fleet_ns, "configsets", "motd")
            s = cs.get("status") or {}
            assert s.get("observedGeneration") == cs["metadata"]["generation"], s
            assert (s["matched"], s["updated"], s["failed"], s["pending"]) == (5, 5, 0, 0), s
            assert cond(cs, "Progressing")["status"] == "False"
            assert cond(cs, "Degraded")["status"] == "False"
            return cs

        eventually(all_updated, timeout=60, message="5 of 5 updated")

        # A change that fails on one node only: its template reads a label fleet-0 lacks.
        spec["files"] = [{"path": str(target), "template": "{{ node.labels['color'] }}\n"}]
        put_configset(api, fleet_ns, "motd", spec)

        def one_failed():
            cs = get(api, fleet_ns, "configsets", "motd")
            s = cs.get("status") or {}
            assert s.get("observedGeneration") == cs["metadata"]["generation"], s
            assert (s["matched"], s["updated"], s["failed"], s["pending"]) == (5, 4, 1, 0), s
            assert s["failedNodes"] == ["fleet-0"]
            assert cond(cs, "Degraded")["status"] == "True"
            assert "fleet-0" in cond(cs, "Degraded")["message"]
            return cs

        eventually(one_failed, timeout=60, message="4 updated, fleet-0 failed")
        after_more_syncs(controller)
    finally:
        watcher.stop()
    # One Warning Event for the transition to Degraded, however many syncs saw it Degraded.
    degraded = configset_events(api, fleet_ns, "motd")["Degraded"]
    assert [(e.type, e.count) for e in degraded] == [("Warning", 1)], degraded
    assert degraded[0].message == "failed on fleet-0"
    # Coalesced: five agents reported twice each (ten node writes), yet the ConfigSet's status
    # changed fewer times, and never more often than once per sync period over the test.
    elapsed = time.monotonic() - started
    assert len(watcher.seen) < 10, watcher.seen
    assert len(watcher.seen) <= elapsed / SYNC_PERIOD + 1, (len(watcher.seen), elapsed)


def test_printer_columns_show_matched_updated_failed(kubeconfig, fleet_ns, api, controller):
    import subprocess

    put_configset(api, fleet_ns, "cols", {"selector": {"matchLabels": {"role": "none"}}})
    eventually(
        lambda: (get(api, fleet_ns, "configsets", "cols").get("status") or {}).get("matched") == 0,
        timeout=30,
    )
    out = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "-n", fleet_ns, "get", "configsets", "cols"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    header = out.splitlines()[0].split()
    assert header == [
        "NAME",
        "MATCHED",
        "UPDATED",
        "FAILED",
        "UPDATING",
        "UNAVAILABLE",
        "PAUSED",
        "REVISION",
        "AGE",
    ], out
    # No node carries role=none: the condition and a Warning name the label and what nodes carry.
    matched = cond(get(api, fleet_ns, "configsets", "cols"), "Matched")
    assert (matched["status"], matched["reason"]) == ("False", "LabelNotCarried"), matched
    assert matched["message"].startswith("label role=none: not carried (nodes carry: "), matched

    def warned():
        found = configset_events(api, fleet_ns, "cols").get("LabelNotCarried")
        assert found, "no LabelNotCarried Event yet"
        return found

    (warning,) = eventually(warned, timeout=30)
    assert warning.type == "Warning" and warning.message == matched["message"]


class BetweenWatch:
    """Watches every ManagedNode; records the most nodes ever seen between revisions at once
    (admitted to one revision, reporting another) for one ConfigSet."""

    def __init__(self, api, ns, configset):
        self.configset, self.most, self.nodes = configset, 0, {}
        # (wall time seen, node, admitted revision, reported revision, lastApplied, error)
        self.log: list[tuple[float, str, Any, Any, Any, Any]] = []
        self._stop = threading.Event()
        self._w = watch.Watch()
        threading.Thread(target=self._run, args=(api, ns), daemon=True).start()

    def _run(self, api, ns):
        try:
            for event in self._w.stream(
                client.CustomObjectsApi(api).list_namespaced_custom_object,
                GROUP,
                VERSION,
                ns,
                "managednodes",
                timeout_seconds=600,
            ):
                obj = event["object"]
                admitted = ((obj.get("spec") or {}).get("configsetRevisions") or {}).get(
                    self.configset
                )
                entry = next(
                    (
                        e
                        for e in (obj.get("status") or {}).get("configsets") or []
                        if e["name"] == self.configset
                    ),
                    {},
                )
                self.nodes[obj["metadata"]["name"]] = (admitted, entry.get("revision"))
                self.log.append(
                    (
                        time.time(),
                        obj["metadata"]["name"],
                        admitted,
                        entry.get("revision"),
                        entry.get("lastApplied"),
                        entry.get("error"),
                    )
                )
                between = sum(1 for a, r in self.nodes.values() if a and a != r)
                self.most = max(self.most, between)
                if self._stop.is_set():
                    return
        except Exception:
            if not self._stop.is_set():
                raise

    def stop(self):
        self._stop.set()
        self._w.stop()


def set_pool(api, ns, name, spec):
    """Merge ``spec`` into a NodePool's spec (the default pool exists once the controller ran)."""
    eventually(lambda: get(api, ns, "nodepools", name), timeout=60, message=f"pool {name}")
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, "nodepools", name, {"spec": spec}
    )


def nm(kubeconfig, ns, *args):
    import subprocess

    from tests.cluster.agent import NODEMANAGER

    return subprocess.run(
        [NODEMANAGER, "rollout", *args, "--kubeconfig", kubeconfig, "-n", ns],
        capture_output=True,
        text=True,
        timeout=120,
    )


def rollout_status(api, ns, name):
    return get(api, ns, "configsets", name).get("status") or {}


def new_revision(api, ns, name, number) -> str:
    """The name of revision ``number`` once the ConfigSet's status shows it current."""
    return eventually(
        lambda: (
            rollout_status(api, ns, name).get("revision") == number
            and rollout_status(api, ns, name)["updateRevision"]
        ),
        timeout=60,
    )


def syncs(controller) -> float:
    import re
    import urllib.request

    with urllib.request.urlopen(
        f"http://127.0.0.1:{controller.metrics_port}/metrics", timeout=5
    ) as r:
        text = r.read().decode()
    return float(re.search(r"^nodemanager_controller_syncs_total (\S+)$", text, re.M).group(1))


def after_more_syncs(controller, n=3, timeout=60):
    """Wait until the controller synced the fleet ``n`` more times (it had every chance to act)."""
    start = syncs(controller)
    eventually(lambda: syncs(controller) >= start + n, timeout=timeout)


def test_staged_rollout_one_node_at_a_time_failure_undo_pause_resume(
    api, kubeconfig, fleet_ns, fleet_dir, agents, controller
):
    name = "staged"
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "rollout": {"maxUnavailable": 1},
        "files": [{"path": str(fleet_dir / "staged"), "content": "v1\n"}],
    }
    put_configset(api, fleet_ns, name, spec)

    def settled(revision):
        def check():
            s = rollout_status(api, fleet_ns, name)
            assert s.get("revision") == revision and s.get("updated") == 5, s
            return s

        return check

    # New nodes get the first revision at once.
    first = eventually(settled(1), timeout=90, message="revision 1 on all nodes")["updateRevision"]

    # A good change: never more than one node between revisions.
    watcher = BetweenWatch(api, fleet_ns, name)
    try:
        spec["files"] = [{"path": str(fleet_dir / "staged"), "content": "v2\n"}]
        put_configset(api, fleet_ns, name, spec)
        good = eventually(settled(2), timeout=120, message="revision 2 on all nodes")
    finally:
        watcher.stop()
    assert watcher.most == 1, watcher.nodes
    assert nm(kubeconfig, fleet_ns, "status", f"configset/{name}").returncode == 0

    # A failing change stops after the first node, and the ConfigSet is Degraded.
    spec["files"] = [
        {"path": str(fleet_dir / "staged"), "template": "{{ node.labels['missing'] }}"}
    ]
    put_configset(api, fleet_ns, name, spec)

    def degraded():
        cs = get(api, fleet_ns, "configsets", name)
        s = cs.get("status") or {}
        assert s.get("revision") == 3 and s.get("failed") == 1, s
        assert cond(cs, "Degraded")["status"] == "True"
        assert cond(cs, "Paused")["reason"] == "RolloutFailed"
        return s

    bad = eventually(degraded, timeout=90, message="Degraded after the first node")
    after_more_syncs(controller)
    nodes = {n: get(api, fleet_ns, "managednodes", n) for n in HOSTS}
    admitted = {n: m["spec"]["configsetRevisions"][name] for n, m in nodes.items()}
    assert sorted(admitted.values()) == sorted(
        [bad["updateRevision"]] + [good["updateRevision"]] * 4
    )
    assert rollout_status(api, fleet_ns, name)["failedNodes"] == bad["failedNodes"]
    failed = nm(kubeconfig, fleet_ns, "status", f"configset/{name}", "--watch", "false")
    assert failed.returncode == 1 and "rollout failed" in failed.stderr, failed
    assert failed.stderr.startswith("error: ") and failed.stderr.count("\n") == 1, failed

    # undo goes back to revision 2's content: the failed node returns to it.
    undone = nm(kubeconfig, fleet_ns, "undo", f"configset/{name}")
    assert undone.returncode == 0, undone.stderr
    back = eventually(settled(4), timeout=90, message="undo applied on all nodes")
    assert back["updateRevision"] == good["updateRevision"]
    assert back["failed"] == 0
    history = nm(kubeconfig, fleet_ns, "history", f"configset/{name}")
    assert good["updateRevision"] in history.stdout and first in history.stdout

    # pause: a new revision is created, nobody is admitted; resume rolls it out.
    assert nm(kubeconfig, fleet_ns, "pause", f"configset/{name}").returncode == 0
    spec["paused"] = True
    spec["files"] = [{"path": str(fleet_dir / "staged"), "content": "v5\n"}]
    put_configset(api, fleet_ns, name, spec)
    eventually(lambda: rollout_status(api, fleet_ns, name).get("revision") == 5, timeout=60)
    after_more_syncs(controller)
    s = rollout_status(api, fleet_ns, name)
    assert s["updated"] == 0 and s["unavailable"] == 0, s
    assert cond(get(api, fleet_ns, "configsets", name), "Paused")["reason"] == "Paused"
    paused = nm(kubeconfig, fleet_ns, "status", f"configset/{name}")  # never 0 while unfinished
    assert paused.returncode == 3 and "is paused" in paused.stdout, paused
    assert nm(kubeconfig, fleet_ns, "resume", f"configset/{name}").returncode == 0
    done = nm(kubeconfig, fleet_ns, "status", f"configset/{name}", "--timeout", "120s")
    assert done.returncode == 0 and "successfully rolled out" in done.stdout, done
    eventually(settled(5), timeout=30)
    assert (fleet_dir / "staged").read_text() == "v5\n"

    # Events: one per transition or rollout step, aggregated per revision, never per sync.
    found = eventually(
        lambda: (e := configset_events(api, fleet_ns, name)) and "RolloutComplete" in e and e,
        timeout=30,
    )
    one = {r: [(e.type, e.count) for e in found.get(r, [])] for r in found}
    assert one["Degraded"] == [("Warning", 1)], one
    assert one["RolloutPausedOnFailure"] == [("Warning", 1)], one
    assert bad["failedNodes"][0] in found["RolloutPausedOnFailure"][0].message
    assert one["RolloutUndone"] == [("Normal", 1)], one
    assert "revision 4" in found["RolloutUndone"][0].message
    assert one["RolloutPaused"] == [("Normal", 1)], one
    assert one["Recovered"] == [("Normal", 1)], one
    assert len(found["RolloutResumed"]) == 2  # after undo (no failure left), after resume
    assert len(found["RolloutStarted"]) == 3  # revisions 2, 3 and 5; 1 goes to all at once
    admitted = {e.message.split("(")[1].split(")")[0]: e for e in found["NodesAdmitted"]}
    # Revision 2's five single admissions (and undo's one) are one Event with a count.
    assert admitted[good["updateRevision"]].count >= 5, admitted
    assert len(found["NodesAdmitted"]) == 4  # one per revision content
    # Four revision contents and a handful of transitions: a bounded set of objects, while the
    # controller synced this ConfigSet many times over.
    assert sum(len(v) for v in found.values()) <= 20, one


def test_min_ready_seconds_spaces_admissions(
    api, fleet_ns, fleet_dir, agents, controller, measured
):
    """With minReadySeconds, the next node is admitted only that long after the previous one
    reported the revision applied (its lastApplied, whole seconds)."""
    name, ready = "paced", 4
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "rollout": {"maxUnavailable": 1, "minReadySeconds": ready},
        "files": [{"path": str(fleet_dir / "paced"), "content": "v1\n"}],
    }
    put_configset(api, fleet_ns, name, spec)

    def settled(revision):
        s = rollout_status(api, fleet_ns, name)
        assert s.get("revision") == revision and s.get("updated") == 5, s
        return s

    eventually(lambda: settled(1), timeout=90, message="revision 1 everywhere")
    watcher = BetweenWatch(api, fleet_ns, name)
    try:
        spec["files"] = [{"path": str(fleet_dir / "paced"), "content": "v2\n"}]
        started = time.monotonic()
        put_configset(api, fleet_ns, name, spec)
        target = new_revision(api, fleet_ns, name, 2)
        eventually(lambda: settled(2), timeout=150, message="revision 2 everywhere")
        took = time.monotonic() - started
    finally:
        watcher.stop()
    assert watcher.most == 1, watcher.nodes
    admitted_at: dict[str, float] = {}
    applied_at: dict[str, str] = {}
    for seen, node, adm, rep, last, error in watcher.log:
        if adm == target:
            admitted_at.setdefault(node, seen)
        if rep == target and not error and last:
            applied_at.setdefault(node, last)
    order = sorted(admitted_at, key=admitted_at.get)
    assert len(order) == 5, admitted_at
    gaps = []
    for previous, nxt in zip(order, order[1:], strict=False):
        reported = dt.datetime.fromisoformat(applied_at[previous].replace("Z", "+00:00"))
        # The report is of this admission, not an older one carried over (whole seconds).
        assert reported.timestamp() >= admitted_at[previous] - 3, (previous, watcher.log)
        gap = admitted_at[nxt] - reported.timestamp()
        gaps.append(gap)
        assert gap >= ready, (previous, nxt, gap, watcher.log)
    measured(f"minReadySeconds {ready}: 5-node rollout", took)
    print(f"minReadySeconds gaps (admission after the previous report): {gaps}")


def test_killed_agent_is_ready_unknown_within_a_minute_and_true_when_back(
    api, kubeconfig, fleet_ns, fleet_dir, agents, controller, measured
):
    host = HOSTS[4]
    eventually(
        lambda: (
            condition(get(api, fleet_ns, "managednodes", host), "Ready").get("status") == "True"
        ),
        timeout=60,
    )
    agents[host].signal(signal.SIGKILL)
    agents[host].proc.wait()
    killed = time.monotonic()
    n = eventually(
        lambda: (
            (m := get(api, fleet_ns, "managednodes", host))
            and condition(m, "Ready").get("status") == "Unknown"
            and m
        ),
        timeout=60,
        interval=0.5,
        message="Ready=Unknown",
    )
    took = time.monotonic() - killed
    ready = condition(n, "Ready")
    assert ready["reason"] == "NodeStatusUnknown" and "Lease" in ready["message"]
    measured("killed agent -> Ready=Unknown (40 s Lease)", took)
    # The other nodes stay Ready.
    for other in HOSTS[:4]:
        assert condition(get(api, fleet_ns, "managednodes", other), "Ready")["status"] != "Unknown"

    # A staged change meanwhile: the dead node takes one of the two slots of the pool and is
    # never admitted; the rollout names it, and past its deadline says it waits for it.
    set_pool(api, fleet_ns, "default", {"maxUnavailable": 2})
    name = "alive"
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "rollout": {"maxUnavailable": 2, "progressDeadlineSeconds": 5},
        "files": [{"path": str(fleet_dir / "alive"), "content": "v1\n"}],
    }
    put_configset(api, fleet_ns, name, spec)

    def stalled_on_the_dead_node():
        cs = get(api, fleet_ns, "configsets", name)
        s = cs.get("status") or {}
        assert s.get("updated") == 4 and s.get("notReadyNodes") == [host], s
        progressing = cond(cs, "Progressing")
        assert progressing["reason"] == "ProgressDeadlineExceeded", progressing
        assert progressing["status"] == "False" and host in progressing["message"]
        return cs

    eventually(stalled_on_the_dead_node, timeout=90, message="deadline naming the dead node")

    # The pool's spec edit reaches its status, and past the pool's own deadline its Updating
    # condition names the dead node (kubectl wait on a pool must not hang on a stale status).
    set_pool(api, fleet_ns, "default", {"progressDeadlineSeconds": 5})

    def pool_stalled_on_the_dead_node():
        pool = get(api, fleet_ns, "nodepools", "default")
        s = pool.get("status") or {}
        assert s.get("observedGeneration") == pool["metadata"]["generation"], s
        assert s.get("maxUnavailable") == 2, s
        updating = cond(pool, "Updating")
        assert updating["reason"] == "ProgressDeadlineExceeded", updating
        assert host in updating["message"], updating
        return pool

    eventually(pool_stalled_on_the_dead_node, timeout=60, message="pool deadline, dead node")
    assert not _admissions(api, fleet_ns, name)[host]
    assert "NodesNotReady" in configset_events(api, fleet_ns, name)

    agents[host] = Agent(
        kubeconfig, fleet_ns, host, fleet_dir / host, "--node-labels", "role=web,color=blue"
    ).start(timeout=180)
    eventually(
        lambda: (
            condition(get(api, fleet_ns, "managednodes", host), "Ready").get("status") == "True"
        ),
        timeout=60,
        message="Ready=True after the agent came back",
    )
    eventually(
        lambda: rollout_status(api, fleet_ns, name).get("updated") == len(HOSTS),
        timeout=90,
        message="the node that came back is admitted and updated",
    )
    set_pool(api, fleet_ns, "default", {"maxUnavailable": 1})


# -- no path around the budget: rollout added with a change, delete and re-create ----------


def _settled(api, ns, name, spec):
    """Every node updated to the revision of the spec as the server holds it (with defaults)."""

    def check():
        cs = get(api, ns, "configsets", name)
        s = cs.get("status") or {}
        assert s.get("observedGeneration") == cs["metadata"]["generation"], s
        assert s.get("updateRevision") == revision_name(name, cs["spec"]), s
        assert s.get("updated") == len(HOSTS), s
        return s

    return check


def _admissions(api, ns, name):
    return {
        h: (
            (get(api, ns, "managednodes", h).get("spec") or {}).get("configsetRevisions") or {}
        ).get(name)
        for h in HOSTS
    }


def test_rollout_added_with_a_change_and_recreate_go_through_the_budget(
    api, fleet_ns, fleet_dir, agents, controller
):
    name = "gate"
    spec = {
        "selector": {"matchLabels": {"role": "web"}},
        "files": [{"path": str(fleet_dir / "gate"), "content": "v1\n"}],
    }
    put_configset(api, fleet_ns, name, spec)
    eventually(
        lambda: rollout_status(api, fleet_ns, name).get("updated") == len(HOSTS),
        timeout=90,
        message="unstaged v1 on every node",
    )

    # spec.rollout added in the same write as a content change: one node at a time.
    watcher = BetweenWatch(api, fleet_ns, name)
    try:
        spec = {**spec, "rollout": {"maxUnavailable": 1}}
        spec["files"] = [{"path": str(fleet_dir / "gate"), "content": "v2\n"}]
        put_configset(api, fleet_ns, name, spec)
        eventually(_settled(api, fleet_ns, name, spec), timeout=120, message="v2 staged")
    finally:
        watcher.stop()
    assert watcher.most == 1, watcher.log

    # Deleted: every node's admission goes (so a re-create cannot inherit or skip one).
    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        GROUP, VERSION, fleet_ns, "configsets", name
    )
    eventually(
        lambda: set(_admissions(api, fleet_ns, name).values()) == {None},
        timeout=60,
        message="admissions pruned",
    )

    # Re-created with other content: through the budget again.
    watcher = BetweenWatch(api, fleet_ns, name)
    try:
        spec["files"] = [{"path": str(fleet_dir / "gate"), "content": "v3\n"}]
        put_configset(api, fleet_ns, name, spec)
        eventually(_settled(api, fleet_ns, name, spec), timeout=120, message="v3 staged")
    finally:
        watcher.stop()
    assert watcher.most == 1, watcher.log
