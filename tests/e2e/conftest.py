"""The fleet for tests/e2e: one real control plane, the zipapp built as `make build` builds it,
and three booted machines (two systemd Debian, one OpenRC) onboarded by the scenarios.

A failing scenario gets every machine's agent journal or log, read inside the machine, as a
section of its report; the run ends with the time of each scenario.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client, config

from tests import artifacts
from tests.cluster import conftest as cluster_conftest
from tests.cluster.conftest import measured  # noqa: F401  (a fixture: numbers the issues ask for)
from tests.cluster.controller import ControllerProcess, shipped_kubeconfig
from tests.cluster.helpers import eventually
from tests.controlplane.cluster import ControlPlane
from tests.e2e.fleet import Node

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "nodemanager"  # the default of every command, as in the README
# name, init, custom labels (approved by the admin with `rbac --node-labels`, set by the agent)
MACHINES = [
    ("e2e-deb-1", "systemd", "role=web"),
    ("e2e-deb-2", "systemd", ""),
    ("e2e-rc-1", "openrc", "role=web"),
]
_times: dict[str, float] = {}


@pytest.fixture(scope="session")
def plane(tmp_path_factory):
    try:
        cp = ControlPlane(tmp_path_factory.mktemp("e2e-controlplane")).start()
    except Exception as e:  # the reason must reach the report, not a skip
        pytest.fail(f"cannot start the test control plane: {e}", pytrace=False)
    try:
        subprocess.run(
            ["kubectl", "--kubeconfig", str(cp.kubeconfig), "apply", "-f", str(ROOT / "crds")],
            check=True,
            capture_output=True,
            text=True,
        )
        api = client.ApiextensionsV1Api(config.new_client_from_config(str(cp.kubeconfig)))

        def established():
            for name in (
                "configsets.common.nodemanager",
                "managednodes.common.nodemanager",
                "nodepools.common.nodemanager",
            ):
                conds = {
                    c.type: c.status
                    for c in api.read_custom_resource_definition(name).status.conditions or []
                }
                assert conds.get("Established") == "True", name
            return True

        eventually(established, timeout=30)
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def zipapp(tmp_path_factory) -> Path:
    """bin/nodemanager as `make build` writes it (deploy/build.py): the release the tests share
    (one build per source hash, tests/artifacts.py), copied here because it unpacks beside
    itself."""
    out = tmp_path_factory.mktemp("build") / "nodemanager"
    shutil.copy2(artifacts.agent_file(), out)
    return out


@pytest.fixture(scope="module")
def controller(plane, zipapp, tmp_path_factory):
    """The fleet controller as on an admin host: the zipapp, with the credential of
    deploy/controller.yaml's ServiceAccount. Nodes get no Secret or ConfigMap from `rbac`; this
    grants each the ones its ConfigSets reference. One replica without leader election: with
    it, the 2-minute API outage of scenario 4 ends its leadership and the process (by design;
    its service manager would restart it), and nothing here restarts it."""
    directory = tmp_path_factory.mktemp("controller")
    kubeconfig = str(plane.kubeconfig)
    subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "create", "namespace", NAMESPACE],
        capture_output=True,
        timeout=60,
    )  # `rbac --shared` applies it again at registration
    c = ControllerProcess(
        shipped_kubeconfig(kubeconfig, NAMESPACE, directory),
        NAMESPACE,
        directory,
        command=(sys.executable, str(zipapp)),
        env={"NODEMANAGER_UNPACK_DIR": str(zipapp.parent / "unpacked")},
    ).start()
    eventually(c.leading, timeout=180, message="fleet controller leading")
    yield c
    assert c.stop() == 0, c.log()[-3000:]


@pytest.fixture(scope="module")
def fleet(plane, zipapp, controller, tmp_path_factory):
    shared = tmp_path_factory.mktemp("fleet")
    nodes = [Node(init, name, shared, labels) for name, init, labels in MACHINES]
    try:
        for node in nodes:
            node.start()
            node.pristine = node.snapshot()  # before anything of nodemanager is on it
        yield nodes
    finally:
        for node in nodes:
            node.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or "fleet" not in item.fixturenames:
        return
    _times[item.name] = report.duration
    if report.failed:
        for node in item.funcargs.get("fleet") or []:
            try:
                text = node.log()
            except Exception as e:  # the machine may be the thing that broke
                text = f"(cannot read the log: {e})"
            report.sections.append((f"agent log on {node.name} ({node.init})", text))
        if item.funcargs.get("controller"):
            report.sections.append(
                ("fleet controller log", item.funcargs["controller"].log()[-20000:])
            )


def pytest_terminal_summary(terminalreporter):
    if not terminalreporter.config.pluginmanager.is_registered(cluster_conftest):
        cluster_conftest.pytest_terminal_summary(terminalreporter)  # e2e alone: print its numbers
    if _times:
        terminalreporter.write_sep("-", "e2e scenario times")
        for name, seconds in _times.items():
            terminalreporter.write_line(f"{name:<45} {seconds:7.1f} s")
