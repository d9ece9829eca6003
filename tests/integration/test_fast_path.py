"""The fast path: converged tasks are recognised without Ansible, drift of every kind is not."""

import os
import pwd
from pathlib import Path

import pytest

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.executor import config
from nodemanager.executor.errors import AnsibleMissing, MissingModules
from nodemanager.executor.events import TaskResult
from nodemanager.executor.probe import converged_tasks
from nodemanager.executor.run import apply, execute
from nodemanager.playbook.build import build

pytestmark = pytest.mark.ansible


def plan_for(root: Path):
    spec = {
        "files": [
            {"path": f"{root}/d", "ensure": "directory", "mode": "0750", "purge": True},
            {
                "path": f"{root}/d/f",
                "content": "x\n",
                "mode": "0640",
                "owner": "root",
                "group": "root",
            },
            {"path": f"{root}/d/l", "ensure": "symlink", "target": f"{root}/d/f"},
            {"path": f"{root}/d/e", "createOnly": True},  # made empty when missing
            {"path": f"{root}/gone", "ensure": "absent"},
            {"path": f"{root}/keep", "content": "default", "createOnly": True},
        ]
    }
    return build(
        merge([ConfigSet.from_dict({"metadata": {"name": "p"}, "spec": spec})]), "debian", "n"
    )


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
    assert converged_tasks(plan) == {s.task for s in plan.tasks()}
    second = apply(plan)
    assert not second.ansible and {r.status for r in second.results} == {"ok"}


@pytest.mark.parametrize("drift", sorted(DRIFTS))
def test_drift_is_detected_and_fixed(tmp_path, drift):
    plan = plan_for(tmp_path)
    apply(plan)
    Path(f"{tmp_path}/keep").write_text("the host's own\n")  # createOnly: never drift
    DRIFTS[drift](tmp_path)
    assert converged_tasks(plan) != {s.task for s in plan.tasks()}
    fixed = apply(plan)
    assert not fixed.failed and fixed.changed()
    assert not apply(plan).ansible  # converged again
    # Ansible itself agrees nothing is left to change, whichever path fixed the drift.
    assert execute(plan).changed() == []
    assert Path(f"{tmp_path}/keep").read_text() == "the host's own\n"


def plan_of(spec: dict):
    return build(
        merge([ConfigSet.from_dict({"metadata": {"name": "h"}, "spec": spec})]), "debian", "n"
    )


def test_native_write_and_its_subscribed_execution_need_no_ansible(tmp_path):
    log = tmp_path / "handler.log"
    plan = plan_of(
        {
            "files": [{"path": f"{tmp_path}/a.conf", "content": "v1\n", "mode": "0600"}],
            "executions": [
                {
                    "command": "/bin/sh",
                    "args": ["-c", f"pwd > {tmp_path}/cwd; echo ran >> {log}"],
                    "subscribe_files": [f"{tmp_path}/a.conf"],
                }
            ],
        }
    )
    first = apply(plan)
    assert not first.failed and not first.ansible
    assert sorted((r.resource.split(":")[0], r.module, r.status) for r in first.results) == [
        ("execution", "native", "changed"),
        ("file", "native", "changed"),
    ]
    assert log.read_text() == "ran\n"
    assert (tmp_path / "cwd").read_text() == "/\n"  # chdir: / as the playbook says
    assert oct(os.stat(f"{tmp_path}/a.conf").st_mode & 0o777) == "0o600"
    again = apply(plan)
    assert (
        not again.ansible and log.read_text() == "ran\n"
    )  # nothing changed, the handler does not run


def test_directory_with_missing_parents_is_made_natively_as_ansible_makes_it(tmp_path):
    # Every directory created, the missing parents too, gets the declared owner and mode; the
    # differential suite compares this with Ansible's file module.
    spec = {"path": f"{tmp_path}/x/y/z", "ensure": "directory", "mode": "0700", "owner": "daemon"}
    first = apply(plan_of({"files": [spec]}))
    assert not first.failed and not first.ansible
    daemon = pwd.getpwnam("daemon").pw_uid
    for d in ("x", "x/y", "x/y/z"):
        st = os.stat(tmp_path / d)
        assert (st.st_mode & 0o7777, st.st_uid) == (0o700, daemon), d
    again = apply(plan_of({"files": [spec]}))
    assert [r.status for r in again.results] == ["ok"]


def test_execution_after_a_task_left_to_ansible_waits_for_it(tmp_path):
    # A new symlink is Ansible's to make; the execution after it depends on it, so it runs after,
    # through Ansible, and the handler of the natively written file too.
    link, log = tmp_path / "link", tmp_path / "log"
    plan = plan_of(
        {
            "files": [
                {"path": f"{tmp_path}/a.conf", "content": "v1\n"},
                {"path": str(link), "ensure": "symlink", "target": f"{tmp_path}/a.conf"},
            ],
            "executions": [
                {
                    "command": "/bin/sh",
                    "args": ["-c", f"test -L {link} && echo seen >> {log}"],
                    "onEveryApply": True,
                },
                {
                    "command": "/bin/sh",
                    "args": ["-c", f"echo handler >> {log}"],
                    "subscribe_files": [f"{tmp_path}/a.conf"],
                },
            ],
        }
    )
    result = apply(plan)
    assert not result.failed and result.ansible, [
        (r.task, r.status, r.message) for r in result.results
    ]
    assert log.read_text() == "seen\nhandler\n"


def test_failing_native_execution_is_reported_with_its_output(tmp_path):
    plan = plan_of(
        {
            "executions": [
                {
                    "command": "/bin/sh",
                    "args": ["-c", "echo broken >&2; exit 3"],
                    "onEveryApply": True,
                }
            ]
        }
    )
    result = apply(plan)
    (r,) = result.results
    assert result.failed and not result.ansible
    assert (
        r.status == "failed" and r.message == "/bin/sh -c echo broken >&2; exit 3 exited 3: broken"
    )


def test_a_locale_that_is_not_installed_applies_everything(tmp_path, monkeypatch):
    # ansible-playbook refuses to start in it: the native write before the symlink (Ansible's)
    # must not be all that happens.
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_CTYPE", raising=False)
    monkeypatch.setenv("LANG", "xx_YY.UTF-8")
    spec = {
        "files": [
            {"path": f"{tmp_path}/a", "content": "a\n"},
            {"path": f"{tmp_path}/l", "ensure": "symlink", "target": f"{tmp_path}/a"},
        ],
        "executions": [
            {
                "command": "/bin/sh",
                "args": ["-c", f"locale > {tmp_path}/seen 2>&1"],
                "onEveryApply": True,
            }
        ],
    }
    plan = build(
        merge([ConfigSet.from_dict({"metadata": {"name": "p"}, "spec": spec})]), "debian", "n"
    )
    result = apply(plan)
    assert result.ansible and not result.failed, result.breakdown()
    assert [r.status for r in result.results] == ["changed"] * 3
    assert os.readlink(tmp_path / "l") == f"{tmp_path}/a"
    assert "LC_ALL=C.UTF-8" in (tmp_path / "seen").read_text()


def test_results_come_in_step_order_whichever_path_took_them(tmp_path):
    # The symlink is Ansible's; in --check the files after it are checked natively, and in a
    # real run the converged one after it is probed: both reported in their place, not first.
    (tmp_path / "c").write_text("c\n")
    spec = {
        "files": [
            {"path": f"{tmp_path}/a", "content": "a\n"},
            {"path": f"{tmp_path}/l", "ensure": "symlink", "target": f"{tmp_path}/a"},
            {"path": f"{tmp_path}/b", "content": "b\n"},
            {"path": f"{tmp_path}/c", "content": "c\n", "mode": "0644"},
        ]
    }
    os.chmod(tmp_path / "c", 0o644)
    plan = build(
        merge([ConfigSet.from_dict({"metadata": {"name": "p"}, "spec": spec})]), "debian", "n"
    )
    order = [s.task for s in plan.tasks()]
    for check in (True, False):
        streamed: list[TaskResult] = []
        result = apply(plan, check=check, diff=True, on_result=streamed.append)
        assert result.ansible and not result.failed
        assert [r.task for r in result.results] == order == [r.task for r in streamed], check


def test_a_missing_module_stops_the_run_before_any_native_step(tmp_path, monkeypatch):
    """ansible-playbook refuses a playbook naming a module it cannot resolve before its first
    task: the native write in front of it must not happen either."""
    monkeypatch.setattr(config, "COLLECTIONS_PATHS", [tmp_path / "no-collections"])
    plan = build(
        merge(
            [
                ConfigSet.from_dict(
                    {
                        "metadata": {"name": "p"},
                        "spec": {
                            "files": [{"path": f"{tmp_path}/a", "content": "a\n"}],
                            "packages": [{"name": "nmtest-hello", "ensure": "installed"}],
                        },
                    }
                )
            ]
        ),
        "arch",
        "n",
    )
    with pytest.raises(MissingModules, match="community.general.pacman"):
        apply(plan)
    assert not (tmp_path / "a").exists()


def test_a_missing_ansible_playbook_stops_the_run_before_any_native_step(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEMANAGER_ANSIBLE_BIN", str(tmp_path / "no-bin"))
    with pytest.raises(AnsibleMissing, match="ansible-playbook not found"):
        apply(plan_of({"files": [{"path": f"{tmp_path}/a", "content": "a\n"}]}))
    assert not (tmp_path / "a").exists()
