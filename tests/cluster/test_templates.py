"""Templates in the daemon: Secrets, ConfigMaps and other nodes' status, re-rendered on change,
and a Secret's value that never leaks."""

from __future__ import annotations

import json
import stat
import subprocess
import uuid

import pytest
import yaml
from kubernetes import client

from tests.cluster.agent import NODEMANAGER, Agent
from tests.cluster.helpers import eventually
from tests.cluster.test_daemon import (
    GROUP,
    VERSION,
    applied,
    custom,
    entry,
    for_host,
    node,
    put_configset,
)

pytestmark = [pytest.mark.cluster, pytest.mark.ansible]


def put_secret(api_client, namespace, name, data: dict[str, str]):
    core = client.CoreV1Api(api_client)
    body = client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data=data)
    try:
        core.read_namespaced_secret(name, namespace)
        core.replace_namespaced_secret(name, namespace, body)
    except client.ApiException:
        core.create_namespaced_secret(namespace, body)


@pytest.fixture
def host():
    return f"host-{uuid.uuid4().hex[:6]}"


def test_secret_canary_never_leaks(kubeconfig, api_client, namespace, host, tmp_path):
    canary = f"CANARY-{uuid.uuid4().hex}"
    runs = tmp_path / "runs"
    runs.mkdir()
    put_secret(api_client, namespace, "api", {"token": canary})
    target = tmp_path / "token.conf"
    files = [
        {
            "path": str(target),
            "template": "token={{ node.secrets.token }}\n",
            "secretRefs": [{"name": "api"}],
        }
    ]
    put_configset(api_client, namespace, "secret", for_host(host, files))
    agent = Agent(
        kubeconfig, namespace, host, tmp_path / "state", env={"TMPDIR": str(runs)}
    ).start()
    try:
        applied(api_client, namespace, host, "secret")
        assert target.read_text() == f"token={canary}\n"
        assert stat.S_IMODE(target.stat().st_mode) == 0o600  # Secret-fed and no mode given
        put_secret(api_client, namespace, "api", {"token": canary + "-2"})  # a second, changing run
        eventually(
            lambda: target.read_text() == f"token={canary}-2\n",
            timeout=60,
            message="secret change applied",
        )
    finally:
        agent.stop()

    assert canary not in agent.log()
    assert canary not in json.dumps(node(api_client, namespace, host))
    events = client.CoreV1Api(api_client).list_namespaced_event(namespace)
    assert events.items and canary not in json.dumps(api_client.sanitize_for_serialization(events))
    assert list(runs.iterdir()) == []  # no run directory left behind

    local = tmp_path / "local.yaml"
    local.write_text(
        yaml.safe_dump_all(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "api"},
                    "stringData": {"token": canary},
                },
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "ConfigSet",
                    "metadata": {"name": "secret"},
                    "spec": {"selector": {}, "files": files},
                },
            ]
        )
    )
    rendered = subprocess.run(
        [NODEMANAGER, "render", "-f", str(local)], capture_output=True, text=True
    )
    assert rendered.returncode == 0, rendered.stderr
    assert canary not in rendered.stdout and "redacted" in rendered.stdout
    shown = subprocess.run(
        [NODEMANAGER, "render", "--show-secrets", "-f", str(local)], capture_output=True, text=True
    )
    assert canary in shown.stdout
    target.write_text("old\n")
    diffed = subprocess.run(
        [NODEMANAGER, "apply", "--diff", "-f", str(local)], capture_output=True, text=True
    )
    assert diffed.returncode == 0, diffed.stdout + diffed.stderr
    assert canary not in diffed.stdout + diffed.stderr
    assert target.read_text() == f"token={canary}\n"


def test_secret_change_reapplies_only_what_depends_on_it(
    kubeconfig, api_client, namespace, host, tmp_path
):
    log = tmp_path / "handlers.log"
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    put_secret(api_client, namespace, "s", {"v": "one"})
    put_configset(
        api_client,
        namespace,
        "dep",
        {
            **for_host(
                host,
                [
                    {
                        "path": str(a),
                        "template": "{{ node.secrets.v }}\n",
                        "secretRefs": [{"name": "s"}],
                        "mode": "0644",
                    },
                    {"path": str(b), "content": "static\n"},
                ],
            ),
            "executions": [
                {
                    "command": "/bin/sh",
                    "args": ["-c", f"echo a >> {log}"],
                    "subscribe_files": [str(a)],
                },
                {
                    "command": "/bin/sh",
                    "args": ["-c", f"echo b >> {log}"],
                    "subscribe_files": [str(b)],
                },
            ],
        },
    )
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        applied(api_client, namespace, host, "dep")
        assert sorted(log.read_text().split()) == ["a", "b"]
        b_mtime = b.stat().st_mtime_ns
        put_secret(api_client, namespace, "s", {"v": "two"})
        eventually(lambda: a.read_text() == "two\n", timeout=60, message="a re-rendered")
        eventually(
            lambda: (
                log.read_text().split() == ["a", "b", "a"]
                or sorted(log.read_text().split()) == ["a", "a", "b"]
            ),
            timeout=30,
            message="only a's handler ran again",
        )
        assert b.stat().st_mtime_ns == b_mtime
        assert (
            stat.S_IMODE(a.stat().st_mode) == 0o644
        )  # an explicit mode wins over the 0600 default
    finally:
        agent.stop()


def test_template_reads_other_nodes_status(kubeconfig, api_client, namespace, host, tmp_path):
    api = custom(api_client)
    api.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "managednodes",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ManagedNode", "metadata": {"name": "peer"}},
    )

    def peer_ip(ip):
        api.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "managednodes",
            "peer",
            {"status": {"interfaces": {"eth0": {"ipv4": [ip], "ipv6": []}}}},
        )

    peer_ip("10.9.9.9")
    hosts = tmp_path / "hosts"
    template = (
        "{% for n in nodes %}{% for i in (n.status.interfaces or {}).values() %}"
        "{% for a in i.ipv4 %}"
        "{{ a }} {{ n.name }}\n{% endfor %}{% endfor %}{% endfor %}"
    )
    put_configset(
        api_client, namespace, "hosts", for_host(host, [{"path": str(hosts), "template": template}])
    )
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:
        eventually(
            lambda: (
                hosts.exists()
                and "10.9.9.9 peer\n" in hosts.read_text()
                and f" {host}\n" in hosts.read_text()
            ),
            timeout=60,
            message="hosts file from every node",
        )
        peer_ip("10.8.8.8")
        eventually(
            lambda: "10.8.8.8 peer\n" in hosts.read_text(),
            timeout=60,
            message="re-rendered on peer change",
        )
    finally:
        agent.stop()


def test_template_failure_is_reported_and_file_left_untouched(
    kubeconfig, api_client, namespace, host, tmp_path
):
    broken, fine = tmp_path / "broken", tmp_path / "fine"
    broken.write_text("as it was\n")
    put_configset(
        api_client,
        namespace,
        "tpl",
        for_host(
            host,
            [
                {"path": str(broken), "template": "{{ node.labels.missing }}"},
                {"path": str(fine), "content": "ok\n"},
            ],
        ),
    )
    agent = Agent(kubeconfig, namespace, host, tmp_path / "state").start()
    try:

        def reported():
            e = entry(node(api_client, namespace, host), "tpl")
            assert e and "spec.files[0].template: undefined in template" in e["error"], e
            return True

        eventually(reported, timeout=60)
        assert fine.read_text() == "ok\n" and broken.read_text() == "as it was\n"
    finally:
        agent.stop()
