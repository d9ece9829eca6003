"""A fleet in a box: three booted machines run the built agent against a real control plane.

The scenarios run in order on the same fleet (each builds on the previous state); their times
are in tests/e2e/README.md.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client, config

from tests import artifacts
from tests.cluster.helpers import eventually
from tests.e2e.conftest import NAMESPACE, ROOT
from tests.e2e.fleet import AGENT, INSTALLED, Node
from tests.integration.test_apt import PACKAGE, build_deb

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

GROUP, VERSION = "common.nodemanager", "v1"
WEB = "/etc/e2e/web.conf"
ROTATED = "e2e-deb-2"  # bootstrapped with a 10-minute token (the API's minimum lifetime)
SHORT_TTL = 600
HOLD = "upgrade.nodemanager/hold"
state: dict[str, Any] = {}  # what a scenario hands to a later one


@pytest.fixture(scope="module")
def admin(plane):
    api = config.new_client_from_config(str(plane.kubeconfig))
    yield api
    api.close()


def nodemanager(zipapp: Path, *args: str) -> str:
    """The admin's `nodemanager` (the same zipapp, on the host)."""
    env = {**os.environ, "NODEMANAGER_UNPACK_DIR": str(zipapp.parent / "unpacked")}
    done = subprocess.run(
        [sys.executable, str(zipapp), *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, f"nodemanager {' '.join(args)}: {done.stderr}"
    return done.stdout


def kubectl(plane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(plane.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def managed_node(admin, name: str) -> dict[str, Any]:
    return client.CustomObjectsApi(admin).get_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "managednodes", name
    )


def condition(node: dict[str, Any], kind: str) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c["status"]
    return None


def entry(node: dict[str, Any], configset: str) -> dict[str, Any] | None:
    for e in (node.get("status") or {}).get("configsets") or []:
        if e["name"] == configset:
            return e
    return None


def put_configset(admin, name: str, spec: dict[str, Any]) -> int:
    """Create or replace a ConfigSet; its generation (what agents report applied: the
    resourceVersion also moves when the fleet controller writes the ConfigSet's status)."""
    api = client.CustomObjectsApi(admin)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ConfigSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }
    try:
        current = api.get_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "configsets", name)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        done = api.replace_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, "configsets", name, body
        )
    except client.ApiException as e:
        if e.status != 404:
            raise
        done = api.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "configsets", body)
    return done["metadata"]["generation"]


def applied(admin, node: str, configset: str, generation: int) -> bool:
    """The node reports this version of the ConfigSet applied without error, and is Ready."""
    mn = managed_node(admin, node)
    e = entry(mn, configset)
    assert e and e["generation"] == generation and not e["error"], e
    assert condition(mn, "Ready") == "True", mn.get("status")
    return True


def lease_renewed_after(admin, node: str, since: datetime.datetime) -> bool:
    lease = client.CoordinationV1Api(admin).read_namespaced_lease(node, NAMESPACE)
    assert lease.spec.holder_identity == node
    assert lease.spec.renew_time and lease.spec.renew_time > since, lease.spec.renew_time
    return True


def web_spec(content: str) -> dict[str, Any]:
    return {
        "selector": {"matchLabels": {"role": "web"}},
        "files": [
            {"path": "/etc/e2e", "ensure": "directory", "mode": "0755"},
            {"path": WEB, "content": content, "mode": "0644"},
        ],
    }


def one_file(node: Node, path: str, content: str) -> dict[str, Any]:
    """A ConfigSet spec for this node alone: one file under /etc/e2e."""
    return {
        "selector": {"matchLabels": {"kubernetes.io/hostname": node.name}},
        "files": [
            {"path": "/etc/e2e", "ensure": "directory", "mode": "0755"},
            {"path": path, "content": content},
        ],
    }


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def until(check: Any, *args: Any, timeout: float = 60, message: str = "") -> Any:
    """``check(*args)`` eventually truthy (arguments bound now, not when the loop moved on);
    an API error (not found yet, the server restarting) counts as not yet."""

    def attempt() -> Any:
        try:
            return check(*args)
        except (client.ApiException, urllib3.exceptions.HTTPError) as e:
            raise AssertionError(f"API: {e}") from e

    return eventually(attempt, timeout=timeout, interval=0.5, message=message or str(args))


def ready(admin, name: str) -> bool:
    assert condition(managed_node(admin, name), "Ready") == "True"
    return True


def probed(node: Node) -> bool:
    assert node.probe("/readyz") == 200, f"{node.name}: /readyz"
    return True


def restarted(node: Node, old_pid: int | None) -> bool:
    pid = node.agent_pid()
    assert pid is not None and pid != old_pid, (pid, old_pid)
    return True


def by_name(fleet: list[Node], name: str) -> Node:
    return next(n for n in fleet if n.name == name)


def token_claims(node: Node) -> dict[str, Any]:
    from nodemanager.kube.tokens import claims, token_of

    token = token_of(str(node.machine.path("/etc/nodemanager/kubeconfig")))
    assert token, "no token in the node's kubeconfig"
    return claims(token)


def admit(plane, zipapp: Path, node: Node, kit: Path) -> bytes:
    """Once, as an admin: the objects one node needs, and a short-lived bootstrap credential
    (the file's content, to copy onto the host)."""
    approve = ["--node-labels", node.node_labels] if node.node_labels else []
    manifests = nodemanager(zipapp, "rbac", "--shared", "--hostname", node.name, *approve)
    kubectl(plane, "apply", "-f", "-", stdin=manifests)
    bootstrap = kit / f"{node.name}.bootstrap"
    nodemanager(zipapp, "token", "--hostname", node.name, "--kubeconfig", str(plane.kubeconfig),
                "--ttl", "1h", "--out", str(bootstrap))  # fmt: skip
    return bootstrap.read_bytes()


def test_1_registration(fleet, plane, admin, zipapp, tmp_path_factory):
    """Onboard every machine as the README says; three ManagedNodes with labels, Ready."""
    kit = tmp_path_factory.mktemp("bootstrap")
    for node in fleet:
        t0 = time.monotonic()
        bootstrap = admit(plane, zipapp, node, kit)
        # on the host, with the file copied over
        node.install(zipapp, drift_check="20s")
        ttl = ["--token-ttl", f"{SHORT_TTL}s"] if node.name == ROTATED else []
        t1 = time.monotonic()
        node.bootstrap(bootstrap, *ttl)
        t2 = time.monotonic()
        node.enable_now()
        print(f"{node.name}: admin {t1 - t0:.1f} s, bootstrap {t2 - t1:.1f} s")
    state["bootstrapped"] = time.time()

    for node in fleet:
        until(ready, admin, node.name, timeout=120, message=f"{node.name} registered, Ready")
        mn = managed_node(admin, node.name)
        labels = mn["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == node.name
        # upstream's values, one per key: the os-release ID; no nodemanager.io/os
        assert labels["kubernetes.io/os"] == "debian" and "nodemanager.io/os" not in labels
        assert labels.get("role") == ("web" if node.node_labels else None)
        assert "Debian GNU/Linux 12" in mn["status"]["osPrettyName"]
        assert mn["status"]["release"]  # uname -r, as upstream
        until(probed, node, timeout=30)
        # the built agent under the service manager, with the machine's own state directory
        pid = node.agent_pid()
        assert pid, f"no agent process on {node.name}"
        assert node.check(f"tr '\\0' ' ' < /proc/{pid}/cmdline").startswith(f"python3 {AGENT}")
        assert node.service_active() and node.service_enabled()
        assert node.machine.path("/var/lib/nodemanager").is_dir()
        assert node.read("/etc/nodemanager/kubeconfig")
        assert node.read("/root/bootstrap.kubeconfig") is None
    assert {i["metadata"]["name"] for i in _list_nodes(admin)} == {n.name for n in fleet}


def _list_nodes(admin) -> list[dict[str, Any]]:
    return client.CustomObjectsApi(admin).list_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "managednodes"
    )["items"]


def test_2_selection(fleet, admin):
    """A ConfigSet for two of three lands on exactly those; the hosts-from-nodes template is
    right on every machine."""
    selected = {"e2e-deb-1", "e2e-rc-1"}  # role=web, approved at `rbac --node-labels`
    rv = put_configset(admin, "web", web_spec("served by nodemanager v1\n"))
    hosts = yaml.safe_load((ROOT / "examples" / "cluster" / "hosts-from-nodes.yaml").read_text())
    hosts_rv = put_configset(admin, "hosts", hosts["spec"])

    for node in fleet:
        until(applied, admin, node.name, "hosts", hosts_rv, timeout=120, message=node.name)
    for name in selected:
        until(applied, admin, name, "web", rv, timeout=60, message=f"web on {name}")
    for node in fleet:
        mn = managed_node(admin, node.name)
        assert mn["metadata"]["labels"].get("role") == ("web" if node.name in selected else None)
        if node.name in selected:
            assert node.read(WEB) == "served by nodemanager v1\n"
        else:
            assert entry(mn, "web") is None
            assert node.read(WEB) is None

    def hosts_right() -> bool:
        expected = {"127.0.0.1 localhost", "::1 localhost"}
        for mn in sorted(_list_nodes(admin), key=lambda n: n["metadata"]["name"]):
            name = mn["metadata"]["name"]
            interfaces = (mn.get("status") or {}).get("interfaces") or {}
            assert interfaces, f"{name} reports no interfaces yet"
            for ifname, addrs in sorted(interfaces.items()):
                for ip in addrs.get("ipv4", []) + addrs.get("ipv6", []):
                    expected.add(f"{ip} {name} {name}.{ifname}")
        for node in fleet:
            lines = {line.strip() for line in (node.read("/etc/hosts") or "").splitlines()}
            assert lines - {""} == expected, f"{node.name}: {lines ^ expected}"
        return True

    eventually(hosts_right, timeout=90, message="/etc/hosts from every node on every machine")


TOKEN = "/etc/e2e/token"


def node_reads_secret(node: Node, secret: str) -> bool:
    """Whether the node's own credential (its kubeconfig, read from the machine) reads it."""
    api = config.new_client_from_config(str(node.machine.path("/etc/nodemanager/kubeconfig")))
    try:
        client.CoreV1Api(api).read_namespaced_secret(secret, NAMESPACE)
        return True
    except client.ApiException as e:
        assert e.status == 403, e
        return False
    finally:
        api.close()


def test_2b_secret_scoping(fleet, admin, measured):
    """Nodes read only the Secrets their ConfigSets reference, granted by the fleet controller:
    `rbac` grants none. A new reference applies within seconds; a removed one is revoked."""
    web = [by_name(fleet, "e2e-deb-1"), by_name(fleet, "e2e-rc-1")]
    other = by_name(fleet, "e2e-deb-2")
    core = client.CoreV1Api(admin)
    core.create_namespaced_secret(
        NAMESPACE,
        client.V1Secret(metadata=client.V1ObjectMeta(name="web-token"), string_data={"t": "s3"}),
    )
    assert not any(node_reads_secret(n, "web-token") for n in fleet), "granted before any ref"
    spec = web_spec("")
    spec["files"] = [
        spec["files"][0],
        {"path": TOKEN, "template": "{{ node.secrets.t }}", "secretRefs": [{"name": "web-token"}]},
    ]
    added = time.monotonic()
    rv = put_configset(admin, "web-secret", spec)
    for node in web:
        until(applied, admin, node.name, "web-secret", rv, timeout=60, message=node.name)
    granted = time.monotonic() - added
    for node in web:
        assert node.read(TOKEN) == "s3"
        assert node_reads_secret(node, "web-token")
    assert not node_reads_secret(other, "web-token"), "referenced only by the web ConfigSet"
    assert other.read(TOKEN) is None

    spec["files"] = [spec["files"][0], {"path": TOKEN, "content": "static\n"}]
    removed = time.monotonic()
    put_configset(admin, "web-secret", spec)
    eventually(
        lambda: not any(node_reads_secret(n, "web-token") for n in web),
        timeout=30,
        interval=0.2,
        message="the removed reference is revoked",
    )
    revoked = time.monotonic() - removed
    measured("e2e: new Secret reference applied on both web machines", granted)
    measured("e2e: removed Secret reference revoked", revoked)


def test_3_kill_9(fleet, admin):
    """kill -9 the agent: the service manager restarts it, and it converges on what changed
    while it was gone."""
    victims = [by_name(fleet, "e2e-deb-1"), by_name(fleet, "e2e-rc-1")]
    before = {}
    for node in victims:
        before[node.name] = node.agent_pid()
        node.check(f"kill -9 {before[node.name]}")
    rv = put_configset(admin, "web", web_spec("served by nodemanager v2\n"))
    for node in victims:
        until(restarted, node, before[node.name], timeout=60, message="restarted by its service")
        until(probed, node, timeout=60)
        until(applied, admin, node.name, "web", rv, timeout=90, message="converged")
        assert node.read(WEB) == "served by nodemanager v2\n"
        assert node.service_active()
    state["web_rv"] = rv


def test_4_api_down(fleet, plane, admin, controller):
    """The API is down for two minutes; a managed file edited by hand meanwhile is reverted
    during the outage, and the node's status and lease catch up when the API returns. The fleet
    controller does not count the outage against the nodes' Leases (no Ready=Unknown)."""
    node = by_name(fleet, "e2e-deb-1")
    controller_log = len(controller.log())
    changes = _metric(node, "nodemanager_file_changes_total")
    plane.stop_apiserver()
    down = time.monotonic()
    try:
        time.sleep(5)
        node.write(WEB, "edited by hand\n")
        eventually(
            lambda: node.read(WEB) == "served by nodemanager v2\n",
            timeout=60,
            interval=0.5,
            message="the hand edit reverted while the API is down",
        )
        reverted_after = time.monotonic() - down
        assert _metric(node, "nodemanager_file_changes_total") > changes
        assert all(n.probe("/healthz") == 200 for n in fleet)
        time.sleep(max(0.0, 120 - (time.monotonic() - down)))
    finally:
        plane.restart_apiserver()
    back = now()
    print(f"reverted {reverted_after:.1f} s into the outage")
    for n in fleet:
        until(lease_renewed_after, admin, n.name, back, timeout=90, message="lease after outage")
        until(applied, admin, n.name, "hosts", _rv(admin, "hosts"), timeout=90)
    assert applied(admin, node.name, "web", state["web_rv"])
    # a change made after the outage still arrives: the watches came back
    rv = put_configset(admin, "web", web_spec("served by nodemanager v3\n"))
    for name in ("e2e-deb-1", "e2e-rc-1"):
        until(applied, admin, name, "web", rv, timeout=120, message=f"v3 on {name}")
    assert node.read(WEB) == "served by nodemanager v3\n"
    state["web_rv"] = rv
    assert "Ready=Unknown" not in controller.log()[controller_log:], controller.log()[-3000:]


def _rv(admin, configset: str) -> int:
    return client.CustomObjectsApi(admin).get_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "configsets", configset
    )["metadata"]["generation"]


def _metric(node: Node, name: str) -> float:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def test_5_reboot(fleet, admin):
    """A machine reboots (one of each init): the agent starts with it and is Ready again."""
    for node in (by_name(fleet, "e2e-deb-1"), by_name(fleet, "e2e-rc-1")):
        old_pid = node.agent_pid()
        boot = now()
        node.machine.reboot()
        until(probed, node, timeout=120, message=f"{node.name} up after reboot")
        assert node.agent_pid() and node.service_active()
        until(lease_renewed_after, admin, node.name, boot, timeout=60)
        until(applied, admin, node.name, "web", state["web_rv"], timeout=60)
        assert node.read(WEB) == "served by nodemanager v3\n"
        assert node.read("/etc/nodemanager/kubeconfig")
        del old_pid  # pids restart from 1 in a new PID namespace: no comparison to make


def test_6_token_rotation(fleet, admin):
    """With a 10-minute token the agent renews it (about 80 % into its life) and keeps working
    past the first token's expiry."""
    node = by_name(fleet, ROTATED)
    first = token_claims(node)
    assert first["exp"] - first["iat"] <= SHORT_TTL + 5
    pid = node.agent_pid()
    eventually(
        lambda: token_claims(node)["iat"] > first["iat"],
        timeout=max(60.0, first["exp"] - time.time() + 30),
        interval=2,
        message="the agent rotated its token",
    )
    second = token_claims(node)
    state["rotated_at"] = second["iat"] - first["iat"]
    assert second["sub"] == first["sub"]
    assert node.agent_pid() == pid, "rotation needed no restart"
    time.sleep(max(0.0, first["exp"] - time.time() + 5))  # the first token is dead now
    rv = put_configset(admin, "rotation", one_file(node, "/etc/e2e/rotation", "still here\n"))
    since = now()
    until(applied, admin, node.name, "rotation", rv, timeout=90)
    until(lease_renewed_after, admin, node.name, since, timeout=30)
    assert node.read("/etc/e2e/rotation") == "still here\n"
    print(f"rotated {state['rotated_at']} s after issue of a {SHORT_TTL} s token")


MANAGED = {"/etc/hosts", "/etc/e2e", "/etc/e2e/rotation", WEB, TOKEN}
# What a booted Debian writes by itself (journal, systemd's own state, login records), and
# what its own timers write whenever they fire (a run across midnight UTC): dpkg-db-backup's
# /var/backups/*.0, logrotate's state and rotated logs, man-db's cache. None is the agent's.
RUNTIME = (
    "/var/log/journal",
    "/var/lib/systemd",
    "/etc/machine-id",
    "/var/log/wtmp",
    "/var/backups",
    "/var/lib/logrotate",
    "/var/cache/man",
)
ROTATED_LOG = re.compile(r"^/var/log/.+\.[0-9]+(\.gz)?$")


def machines_own(path: str) -> bool:
    """Written by the booted machine itself (its runtime, its timers), not by the agent."""
    return path.startswith(RUNTIME) or bool(ROTATED_LOG.match(path))


def ca_leftover(node: Node, path: str) -> bool:
    """The kubernetes client writes the kubeconfig's CA certificate to /tmp/tmpXXXXXXXX and
    removes it at exit; an agent killed with SIGKILL (scenario 3) leaves it. Public data, and
    only where /tmp is not a tmpfs (the OpenRC machine): allowed, but only as exactly that."""
    text = node.read(path) if path.startswith("/tmp/tmp") else None
    return bool(text) and text.startswith("-----BEGIN CERTIFICATE-----")


def test_7_uninstall(fleet, admin):
    """Stop and disable, then remove what the README lists: the host is as it was, apart from
    the managed files. Then the README's cluster step, deleting the ManagedNode: a host gone
    for good no longer counts as unavailable in its pool (it held the default pool's only slot,
    so scenario 8's upgrade waited for it)."""
    gone = (by_name(fleet, ROTATED), by_name(fleet, "e2e-rc-1"))
    for node in gone:
        node.uninstall()
        assert node.agent_pid() is None and not node.service_active()
        assert not node.service_enabled()
        after = node.snapshot()
        changed = {
            path
            for path in set(after) | set(node.pristine)
            if after.get(path) != node.pristine.get(path)
        }
        left = {
            p
            for p in changed
            if p not in MANAGED and not machines_own(p) and not ca_leftover(node, p)
        }
        assert not left, f"{node.name}: left behind or changed: {sorted(left)}"
        for path in INSTALLED[node.init]:
            assert not node.machine.path(path).exists(), path
    custom = client.CustomObjectsApi(admin)
    for node in gone:
        custom.delete_namespaced_custom_object(GROUP, VERSION, NAMESPACE, "managednodes", node.name)

    def freed() -> None:
        pool = (
            custom.get_namespaced_custom_object(
                GROUP, VERSION, NAMESPACE, "nodepools", "default"
            ).get("status")
            or {}
        )
        assert not {n.name for n in gone} & set(pool.get("unavailableNodes") or []), pool
        assert pool.get("nodes") == len(fleet) - len(gone), pool
        return pool

    eventually(freed, timeout=60, message="the uninstalled hosts left the default pool")


UPGRADED = "e2e-deb-1"  # still installed after scenario 7


def kubelet(admin, node: str, stop: threading.Event) -> None:
    """What the Node's kubelet would do with an evicted pod: end it (no kubelet runs here)."""
    core = client.CoreV1Api(admin)
    while not stop.wait(0.5):
        try:
            for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
                if p.metadata.deletion_timestamp is not None:
                    core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace,
                                               grace_period_seconds=0)  # fmt: skip
        except client.ApiException:
            pass


def test_8_upgrade_with_a_real_reboot(fleet, plane, admin, zipapp):
    """spec.upgrade on a systemd machine whose local apt repository gains a newer version of an
    installed package: held, nothing happens; released, the agent cordons and drains the
    Kubernetes Node of its name, upgrades, and — the upgrade marks a reboot required — reboots
    the machine for real with `systemctl reboot`. nspawn exits 133 and is started again (as
    systemd-nspawn@.service does); the agent starts with the machine, uncordons the Node,
    releases the group Lease and reports lastUpgrade."""
    node = by_name(fleet, UPGRADED)
    repo = node.machine.shared / "e2e-apt"
    repo.mkdir()
    build_deb(repo, "1.0")
    node.write("/etc/apt/sources.list", f"deb [trusted=yes] file:{repo} ./\n")
    node.check(f"apt-get update -q && apt-get install -y -q {PACKAGE}")
    node.write(
        "/etc/apt/apt.conf.d/99reboot", 'DPkg::Post-Invoke { "touch /run/reboot-required"; };\n'
    )
    node.check("rm -f /run/reboot-required")
    # The admin grants the group Lease and the drain, and makes the Node (no kubelet here).
    manifests = nodemanager(
        zipapp, "rbac", "--hostname", node.name, "--node-labels", node.node_labels,
        "--lease-groups", "upgrades", "--drain",
    )  # fmt: skip
    kubectl(plane, "apply", "-f", "-", stdin=manifests)
    core = client.CoreV1Api(admin)
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=node.name)))
    core.create_namespaced_pod(
        NAMESPACE,
        client.V1Pod(
            metadata=client.V1ObjectMeta(name="on-deb-1"),
            spec=client.V1PodSpec(
                node_name=node.name, containers=[client.V1Container(name="c", image="none")]
            ),
        ),
    )
    custom = client.CustomObjectsApi(admin)
    upgrade = {"schedule": "* * * * *", "delay": "1h", "group": "upgrades"}
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "managednodes", node.name,
        {"metadata": {"annotations": {HOLD: "maintenance"}}, "spec": {"upgrade": upgrade}},
    )  # fmt: skip
    build_deb(repo, "2.0")
    time.sleep(25)  # every minute is due: an upgrade check (every 20 s) passed while held
    assert node.read(f"/opt/nmtest/{PACKAGE}/VERSION") == "1.0\n"
    assert "lastUpgrade" not in (managed_node(admin, node.name).get("status") or {})
    assert not core.read_node(node.name).spec.unschedulable

    stop = threading.Event()
    helper = threading.Thread(target=kubelet, args=(admin, node.name, stop))
    helper.start()
    seen: dict[str, Any] = {"cordoned": None, "unschedulable": False, "reboots": 0}
    released = time.monotonic()
    custom.patch_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "managednodes", node.name,
        {"metadata": {"annotations": {HOLD: None}}},
    )  # fmt: skip

    def done() -> bool:
        if node.machine.relaunch_if_rebooted():
            seen["reboots"] += 1
            seen["back"] = time.monotonic() - released
        mn = managed_node(admin, node.name)
        status = mn.get("status") or {}
        seen["cordoned"] = seen["cordoned"] or status.get("kubernetesNodeCordoned")
        seen["unschedulable"] |= bool(core.read_node(node.name).spec.unschedulable)
        assert seen["reboots"] == 1, "rebooted"
        assert status.get("lastUpgrade"), status
        up = next(c for c in status.get("conditions") or [] if c["type"] == "Upgrading")
        assert (up["status"], up["reason"]) == ("False", "Succeeded"), up
        assert not core.read_node(node.name).spec.unschedulable
        lease = client.CoordinationV1Api(admin).read_namespaced_lease("upgrades", NAMESPACE)
        assert lease.spec.holder_identity is None
        return True

    try:
        eventually(done, timeout=300, interval=0.5, message="upgraded, rebooted, reported")
    finally:
        stop.set()
        helper.join(timeout=30)
    state["upgrade_reboot"] = (seen["back"], time.monotonic() - released)
    assert node.read(f"/opt/nmtest/{PACKAGE}/VERSION") == "2.0\n"
    assert not node.machine.path("/run/reboot-required").exists()  # a new boot: /run is new
    assert seen["cordoned"] and seen["unschedulable"], seen  # cordoned while upgrading
    status = managed_node(admin, node.name)["status"]
    assert "kubernetesNodeCordoned" not in status  # uncordoned after the reboot
    pods = core.list_namespaced_pod(NAMESPACE, field_selector=f"spec.nodeName={node.name}")
    assert pods.items == []  # drained
    until(probed, node, timeout=60)
    back, reported = state["upgrade_reboot"]
    print(f"upgrade: machine back {back:.0f} s, reported {reported:.0f} s after the hold lifted")


PACKAGED = "e2e-deb-2"  # uninstalled by scenario 7: a booted systemd machine to spare
# What dpkg and apt keep of any package they handled: their databases, caches and logs.
APT_RECORDS = (
    "/var/lib/dpkg",
    "/var/lib/apt",
    "/var/cache/apt",
    "/var/cache/debconf",
    "/var/cache/ldconfig",
    "/var/log/apt",
    "/var/log/dpkg.log",
)


def test_9_debian_package(fleet, plane, admin, zipapp, tmp_path_factory):
    """`apt install ./nodemanager_*.deb` on a booted Debian machine (its Depends, python3 and
    python3-apt, from the machine's own Debian: it has no other apt source), onboarded as the
    README says, applies a ConfigSet; `apt purge` stops it and leaves no file of it behind."""
    node = by_name(fleet, PACKAGED)
    before = node.snapshot()
    (package,) = artifacts.release().glob("nodemanager_*.deb")  # this machine's architecture
    inside = node.machine.shared / package.name  # bind-mounted at the same path inside
    inside.write_bytes(package.read_bytes())
    node.check(f"apt install -y -q {inside}")
    inside.unlink()
    node.agent = "/usr/bin/nodemanager"
    assert node.read("/lib/systemd/system/nodemanager.service")
    node.write("/etc/default/nodemanager", node.flags(drift_check="20s").decode())  # a conffile
    node.bootstrap(admit(plane, zipapp, node, tmp_path_factory.mktemp("deb-bootstrap")))
    node.check("systemctl enable --now nodemanager")
    rv = put_configset(admin, "packaged", one_file(node, "/etc/e2e/packaged", "from the .deb\n"))
    until(applied, admin, node.name, "packaged", rv, timeout=120, message="applied by the .deb")
    assert node.read("/etc/e2e/packaged") == "from the .deb\n"
    pid = node.agent_pid()
    assert pid and node.service_active()
    assert node.check(f"tr '\\0' ' ' < /proc/{pid}/cmdline").startswith("python3 /usr/bin/")

    node.check("apt purge -y -q nodemanager")
    assert node.agent_pid() is None and not node.service_active()
    after = node.snapshot()
    changed = {p for p in set(after) | set(before) if after.get(p) != before.get(p)}
    left = {
        p
        for p in changed
        # MANAGED: the ConfigSets' files; /etc/hosts follows the fleet, which scenario 7 shrank
        if p not in MANAGED | {"/etc/e2e/packaged"}
        and not p.startswith(APT_RECORDS)
        and not machines_own(p)
    }
    assert not left, f"left behind or changed by the package: {sorted(left)}"
