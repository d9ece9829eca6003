"""services[].user rendered: systemd_service in user scope as that user, lingering, and the
module parameters checked against each module's own argument spec (run for real in
tests/integration/test_user_services.py)."""

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.playbook.build import build
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.render import USER_PYTHON, USER_VAR, leaves, module_of
from tests.unit.playbook.argspec import validate

SPEC = {
    "files": [{"path": "/home/al/app.conf", "content": "x"}],
    "services": [
        {
            "name": "app",
            "user": "al",
            "ensure": "running",
            "enable": True,
            "subscribe_files": ["/home/al/app.conf"],
        }
    ],
}


def plan(fam="debian"):
    return build(merge([ConfigSet.from_dict({"metadata": {"name": "cs"}, "spec": SPEC})]), fam, "n")


def test_argspec_user_service_tasks_are_valid_and_run_as_the_user():
    p = plan()
    play = p.playbook[0]
    tasks = [t for t in leaves(play["tasks"] + play["handlers"]) if "file" not in t["name"]]
    modules = [module_of(t)[0] for t in tasks]
    assert modules == [
        "ansible.builtin.command",  # loginctl enable-linger, once (creates)
        "ansible.builtin.wait_for",  # the user's manager is up
        "ansible.builtin.systemd_service",  # started
        "ansible.builtin.systemd_service",  # enabled
        "ansible.builtin.systemd_service",  # restarted (handler)
    ]
    for task in tasks:
        module, params = module_of(task)
        validate(module, params)
    for task in tasks[2:]:
        assert module_of(task)[1]["scope"] == "user"
        assert (task["become"], task["become_user"], task["become_method"]) == (
            True,
            "al",
            "ansible.builtin.su",
        )
        assert task["vars"] == {USER_VAR: "al", "ansible_python_interpreter": USER_PYTHON}
        assert task["environment"]["XDG_RUNTIME_DIR"].startswith("/run/user/{{")
    linger = module_of(tasks[0])[1]
    assert linger["argv"] == ["loginctl", "enable-linger", "al"]
    assert linger["creates"] == "/var/lib/systemd/linger/al"
    # The user name reaches Ansible as data, never as template text: plain when it holds
    # nothing to template, !unsafe when it does.
    assert "become_user: al\n" in to_yaml(p.playbook)


def test_user_service_without_systemd_is_an_error_naming_the_field():
    for fam in ("alpine", "freebsd"):
        p = plan(fam)
        assert "user services need systemd" in p.errors["service:app"]
        assert "spec.services" in p.errors["service:app"]
