"""Rendered tasks checked against each module's own argument spec.

For apk (Alpine), pkgng and sysrc (FreeBSD) this is the check that can run here: those package
and service managers do not exist on this Debian machine. The other modules run for real in
tests/integration.
"""

import pytest

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.playbook.build import build
from nodemanager.playbook.render import leaves, module_of
from tests.unit.playbook.argspec import validate

SPEC = {
    "packages": [
        {"name": "vim"},
        {"name": "curl", "ensure": "latest"},
        {"name": "nano", "ensure": "absent"},
        {"name": "tmux", "version": "3.4"},
    ],
    "files": [
        {"path": "/etc/d", "ensure": "directory", "mode": "0755", "purge": True},
        {
            "path": "/etc/d/a",
            "content": "a",
            "owner": "root",
            "group": "wheel",
            "mode": "0644",
            "createOnly": True,
        },
        {"path": "/etc/d/e"},
        {"path": "/etc/d/l", "ensure": "symlink", "target": "/etc/d/a"},
        {"path": "/etc/old", "ensure": "absent"},
    ],
    "services": [
        {"name": "sshd", "ensure": "running", "enable": True, "subscribe_files": ["/etc/d/a"]},
        {"name": "cron", "ensure": "stopped", "enable": False},
    ],
    "executions": [{"command": "/bin/echo", "args": ["hi"], "subscribe_files": ["/etc/d/a"]}],
}


def module_calls(fam, spec=SPEC):
    plan = build(merge([ConfigSet.from_dict({"metadata": {"name": "cs"}, "spec": spec})]), fam, "n")
    play = plan.playbook[0]
    steps = {s.task for s in plan.steps}  # each step's task (its guard's are Ansible's own)
    for task in leaves(play["tasks"] + play.get("handlers", [])):
        if task["name"] not in steps:
            continue
        module, params = module_of(task)
        yield task["name"], module, params


@pytest.mark.argspec
@pytest.mark.parametrize("fam", ["alpine", "freebsd", "arch", "debian", "fedora"])
def test_argspec_every_rendered_task_is_valid_for_its_module(fam):
    seen = set()
    for name, module, params in module_calls(fam):
        seen.add(module)
        assert (
            validate(
                module,
                {k: str(v) if type(v).__name__ == "Unsafe" else v for k, v in params.items()},
            )
            == []
        ), name
    assert {
        "ansible.builtin.service",
        "ansible.builtin.copy",
        "ansible.builtin.file",
        "ansible.builtin.command",
    } <= seen


@pytest.mark.argspec
def test_argspec_freebsd_arguments_task_is_valid_for_sysrc():
    spec = {
        "services": [
            {"name": "nginx", "ensure": "running", "arguments": "-c /usr/local/etc/nginx.conf"}
        ]
    }
    calls = list(module_calls("freebsd", spec))
    assert calls[0][1] == "community.general.sysrc"
    for name, module, params in calls:
        assert validate(module, dict(params)) == [], name


@pytest.mark.argspec
def test_argspec_validator_catches_a_wrong_state_word():
    assert validate("community.general.apk", {"name": "vim", "state": "running"}) != []
    assert validate("community.general.pkgng", {"name": "vim", "bogus": 1}) != []
