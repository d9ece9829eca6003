"""The fast path: converged tasks are recognised without Ansible, drift of every kind is not."""

import os
from pathlib import Path

import pytest

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor.probe import converged_tasks
from nodemanager.executor.run import apply, execute
from nodemanager.playbook.build import build

pytestmark = pytest.mark.ansible


def plan_for(root: Path):
    spec = {"files": [
        {"path": f"{root}/d", "ensure": "directory", "mode": "0750", "purge": True},
        {"path": f"{root}/d/f", "content": "x\n", "mode": "0640", "owner": "root", "group": "root"},
        {"path": f"{root}/d/l", "ensure": "symlink", "target": f"{root}/d/f"},
        {"path": f"{root}/d/e"},
        {"path": f"{root}/gone", "ensure": "absent"},
        {"path": f"{root}/keep", "content": "default", "createOnly": True},
    ]}
    return build(merge([ConfigSet.from_dict({"metadata": {"name": "p"}, "spec": spec})]), "debian", "n")


DRIFTS = {
    "content": lambda r: Path(f"{r}/d/f").write_text("changed\n"),
    "mode": lambda r: os.chmod(f"{r}/d/f", 0o644),
    "owner": lambda r: os.chown(f"{r}/d/f", 1, -1),
    "dir-mode": lambda r: os.chmod(f"{r}/d", 0o755),
    "symlink-target": lambda r: (os.unlink(f"{r}/d/l"), os.symlink("/etc/hostname", f"{r}/d/l")),
    "symlink-replaced-by-file": lambda r: (os.unlink(f"{r}/d/l"), Path(f"{r}/d/l").write_text("")),
    "absent-exists": lambda r: Path(f"{r}/gone").write_text("back"),
    "undeclared-file": lambda r: Path(f"{r}/d/stray").write_text("x"),
    "touched-file-missing": lambda r: os.unlink(f"{r}/d/e"),
}


def test_converged_host_needs_no_ansible(tmp_path):
    plan = plan_for(tmp_path)
    first = apply(plan)
    assert first.ansible and not first.failed
    assert converged_tasks(plan) == set(plan.origins) - {n for n, o in plan.origins.items() if o.handler}
    second = apply(plan)
    assert not second.ansible and {r.status for r in second.results} == {"ok"}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_drift_is_detected_and_fixed(tmp_path, drift):
    plan = plan_for(tmp_path)
    apply(plan)
    Path(f"{tmp_path}/keep").write_text("the host's own\n")  # createOnly: never drift
    DRIFTS[drift](tmp_path)
    assert converged_tasks(plan) != set(t for t in plan.origins if not plan.origins[t].handler)
    fixed = apply(plan)
    assert not fixed.failed and fixed.changed()
    assert not apply(plan).ansible  # converged again
    # Ansible itself agrees nothing is left to change, whichever path fixed the drift.
    assert execute(plan).changed() == []
    assert Path(f"{tmp_path}/keep").read_text() == "the host's own\n"


def test_native_write_still_runs_the_subscribed_handler_through_ansible(tmp_path):
    log = tmp_path / "handler.log"
    spec = {"files": [{"path": f"{tmp_path}/a.conf", "content": "v1\n", "mode": "0600"}],
            "executions": [{"command": "/bin/sh", "args": ["-c", f"echo ran >> {log}"], "subscribe_files": [f"{tmp_path}/a.conf"]}]}
    plan = build(merge([ConfigSet.from_dict({"metadata": {"name": "h"}, "spec": spec})]), "debian", "n")
    first = apply(plan)
    assert [r.module for r in first.results if r.resource.startswith("file:")] == ["native"]
    assert first.ansible and log.read_text() == "ran\n"
    assert oct(os.stat(f"{tmp_path}/a.conf").st_mode & 0o777) == "0o600"
    again = apply(plan)
    assert not again.ansible and log.read_text() == "ran\n"  # nothing changed, the handler does not run
