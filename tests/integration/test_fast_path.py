"""The fast path: converged tasks are recognised without Ansible, drift of every kind is not."""

import os
from pathlib import Path

import pytest

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor.probe import converged_tasks
from nodemanager.executor.run import apply
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
    assert fixed.ansible and not fixed.failed and fixed.changed()
    assert not apply(plan).ansible  # converged again
    assert Path(f"{tmp_path}/keep").read_text() == "the host's own\n"
