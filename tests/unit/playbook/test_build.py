"""The playbook as data: module per platform, handlers, origins; values cannot add tasks."""

import pytest
import yaml

from nodemanager.api import ConfigSet
from nodemanager.desired.merge import merge
from nodemanager.desired.templates import Rendered
from nodemanager.playbook.build import build
from nodemanager.playbook.dump import to_yaml
from nodemanager.playbook.errors import UnsupportedPlatform
from nodemanager.playbook.platforms import family
from nodemanager.playbook.render import GUARD, GUARD_STAT, REDACTED, leaves
from nodemanager.playbook.steps import EXEC_PATH, exec_argv


def plan_for(spec, fam="arch", **kw):
    cs = ConfigSet.from_dict({"metadata": {"name": "cs"}, "spec": spec})
    return build(merge([cs]), fam, "node1", **kw)


def tasks(plan):
    """The task of each step (each play task is a block of its guard, itself and its reporter)."""
    steps = {s.task for s in plan.steps}
    return [t for t in leaves(plan.playbook[0]["tasks"]) if t["name"] in steps]


def handlers(plan):
    return plan.playbook[0].get("handlers", [])


@pytest.mark.parametrize(
    "os_id, id_like, expected",
    [
        ("arch", (), "arch"),
        ("alpine", (), "alpine"),
        ("freebsd", (), "freebsd"),
        ("ubuntu", ("debian",), "debian"),
        ("pop", ("ubuntu", "debian"), "debian"),
        ("rocky", ("rhel", "centos", "fedora"), "fedora"),
        ("fedora", (), "fedora"),
    ],
)
def test_family(os_id, id_like, expected):
    assert family(os_id, id_like) == expected


def test_unknown_os_is_a_clear_error():
    with pytest.raises(UnsupportedPlatform, match="unsupported OS 'plan9'"):
        family("plan9")


@pytest.mark.parametrize(
    "fam, module, name",
    [
        ("arch", "community.general.pacman", "vim=9.1"),
        ("alpine", "community.general.apk", "vim=9.1"),
        ("freebsd", "community.general.pkgng", "vim-9.1"),
        ("debian", "ansible.builtin.apt", "vim=9.1"),
        ("fedora", "ansible.builtin.dnf", "vim-9.1"),
    ],
)
def test_package_module_per_platform(fam, module, name):
    plan = plan_for(
        {"packages": [{"name": "vim", "version": "9.1"}, {"name": "nano", "ensure": "absent"}]}, fam
    )
    assert tasks(plan)[0][module] == {"name": name, "state": "present"}
    assert tasks(plan)[1][module] == {"name": "nano", "state": "absent"}


def test_file_forms():
    plan = plan_for(
        {
            "files": [
                {
                    "path": "/d",
                    "ensure": "directory",
                    "mode": "0750",
                    "owner": "root",
                    "purge": True,
                },
                {"path": "/d/f", "content": "x\n", "mode": "600", "createOnly": True},
                {"path": "/d/empty", "createOnly": True},
                {"path": "/d/none"},
                {"path": "/d/l", "ensure": "symlink", "target": "/d/f"},
                {"path": "/gone", "ensure": "absent"},
            ]
        }
    )
    t = tasks(plan)
    assert t[0]["ansible.builtin.file"] == {
        "path": "/d",
        "state": "directory",
        "owner": "root",
        "mode": "0750",
    }
    assert t[1]["nodemanager.core.purge"] == {
        "path": "/d",
        "keep": ["/d/empty", "/d/f", "/d/l", "/d/none"],
    }
    assert t[2]["ansible.builtin.copy"] == {
        "dest": "/d/f",
        "content": "x\n",
        "owner": "root",  # upstream chowns every file it writes, root:root without an owner
        "group": "root",
        "mode": "0600",
        "force": False,
    }
    # no content with createOnly: made empty when missing (upstream: nothing at all)
    assert t[3]["ansible.builtin.file"]["state"] == "touch"
    assert t[3]["ansible.builtin.file"]["path"] == "/d/empty"
    # A file's path is literal; a stat and an assert before it, in its block, refuse a
    # directory there (or a symlink to one) before the module runs.
    blocks = plan.playbook[0]["tasks"]
    for block, step in (
        (blocks[2], "cs | file /d/f"),
        (blocks[3], "cs | file /d/empty"),
    ):
        stat, check, _ = block["block"]
        assert stat["name"] == GUARD_STAT.format(task="ConfigSet " + step)
        assert stat["ansible.builtin.stat"]["path"] == step.rpartition(" ")[2]
        assert stat["ansible.builtin.stat"]["follow"] is True
        assert check["name"] == GUARD.format(task="ConfigSet " + step)
        assert check["ansible.builtin.assert"]["that"] == [
            f"not ({stat['register']}.stat.isdir | default(false))"
        ]
        assert block["rescue"] == [
            {"name": "Go on with the other resources", "ansible.builtin.meta": "noop"}
        ]
    assert [b["block"][0]["name"] for b in blocks[:2]] == [
        "ConfigSet cs | file /d",
        "ConfigSet cs | purge /d",
    ]
    # /d/none, no content and not createOnly: no task, as upstream (the purge keeps it)
    assert t[4]["ansible.builtin.file"] == {
        "path": "/d/l",
        "src": "/d/f",
        "state": "link",
        "force": True,
    }
    assert t[5]["ansible.builtin.file"] == {"path": "/gone", "state": "absent"}
    assert len(t) == 6


@pytest.mark.parametrize(
    "file",
    [{"path": "/e"}, {"path": "/e", "content": ""}, {"path": "/e", "template": "{{ '' }}"}],
    ids=["neither", "empty content", "empty render"],
)
def test_a_file_without_content_is_left_alone_as_upstream(file):
    """upstream handleFileSet writes only when Content is not empty (after its template)."""
    contents = {"/e": Rendered("", secret=False)}
    assert tasks(plan_for({"files": [file]}, contents=contents)) == []


def test_an_ownerless_file_is_owned_root_as_upstream_and_wheel_on_freebsd():
    """upstream pkg/os/*: files.New(logger, "root", "root"), FreeBSD "root", "wheel"."""
    spec = {"files": [{"path": "/e", "content": "x"}, {"path": "/f", "content": "x", "group": "g"}]}
    linux = [t["ansible.builtin.copy"] for t in tasks(plan_for(spec))]
    assert [(c["owner"], c["group"]) for c in linux] == [("root", "root"), ("root", "g")]
    bsd = [t["ansible.builtin.copy"] for t in tasks(plan_for(spec, "freebsd"))]
    assert [(c["owner"], c["group"]) for c in bsd] == [("root", "wheel"), ("root", "g")]


def test_subscriptions_become_handlers_executions_first():
    plan = plan_for(
        {
            "files": [
                {"path": "/etc/a.conf", "content": "a"},
                {"path": "/etc/b.conf", "content": "b"},
            ],
            "services": [
                {
                    "name": "svc",
                    "ensure": "running",
                    "enable": True,
                    "subscribe_files": ["/etc/a.conf"],
                }
            ],
            "executions": [
                {"command": "/bin/reload", "subscribe_files": ["/etc/a.conf"]},
                {"command": "/bin/always", "onEveryApply": True},
                {"command": "/bin/never"},  # upstream's handleExecutions never runs it
            ],
        }
    )
    t, h = tasks(plan), handlers(plan)
    assert not any("/bin/never" in x["name"] for x in t + h)
    assert t[0]["notify"] == ["nodemanager changed /etc/a.conf"]
    assert "notify" not in t[1]  # nothing subscribes to b.conf
    assert [x["name"] for x in h] == [
        "ConfigSet cs | execution /bin/reload",
        "ConfigSet cs | restart service svc",
    ]
    assert h[1]["ansible.builtin.service"] == {"name": "svc", "state": "restarted"}
    assert all(x["listen"] == ["nodemanager changed /etc/a.conf"] for x in h)
    assert t[-1]["ansible.builtin.command"] == {
        "argv": exec_argv(["/bin/always"]),
        "chdir": "/",
        "expand_argument_vars": False,
    }
    assert t[-1]["environment"] == {"PATH": EXEC_PATH}
    # Started apart from enabled; the restart is skipped when this run just started the service.
    start, enable = (x for x in t if "ansible.builtin.service" in x)
    assert start["ansible.builtin.service"] == {"name": "svc", "state": "started"}
    assert enable["ansible.builtin.service"] == {"name": "svc", "enabled": True}
    assert (
        h[1]["when"] == f"not ({start['register']} is defined and {start['register']} is changed)"
    )


def test_stopped_service_is_not_restarted_by_subscriptions():
    plan = plan_for(
        {
            "files": [{"path": "/a", "content": "a"}],
            "services": [{"name": "svc", "ensure": "stopped", "subscribe_files": ["/a"]}],
        }
    )
    assert handlers(plan) == [] and "notify" not in tasks(plan)[0]


def test_freebsd_arguments_use_sysrc_and_restart():
    plan = plan_for(
        {"services": [{"name": "nginx", "ensure": "running", "arguments": "-c /x"}]}, "freebsd"
    )
    t = tasks(plan)
    assert t[0]["community.general.sysrc"] == {"name": "nginx_args", "value": "-c /x"}
    assert t[0]["notify"] == handlers(plan)[0]["listen"]


def test_arguments_outside_freebsd_are_an_error_of_that_resource_only():
    plan = plan_for(
        {
            "services": [{"name": "nginx", "ensure": "running", "arguments": "-x"}],
            "files": [{"path": "/a", "content": "a"}],
        },
        "arch",
    )
    assert "only supported on FreeBSD" in plan.errors["service:nginx"]
    assert [t["name"] for t in tasks(plan)] == ["ConfigSet cs | file /a"] and handlers(plan) == []


def test_every_task_has_an_origin():
    plan = plan_for(
        {
            "packages": [{"name": "p"}],
            "files": [{"path": "/a", "content": "a"}],
            "services": [{"name": "s", "ensure": "running", "subscribe_files": ["/a"]}],
        }
    )
    names = [t["name"] for t in leaves(plan.playbook[0]["tasks"]) + handlers(plan)]
    assert sorted(names) == sorted(plan.origins)
    assert plan.origins["ConfigSet cs | restart service s"].resource == "service:s"
    assert plan.origins["ConfigSet cs | restart service s"].handler


def test_secret_fed_content_is_private_and_redacted_on_request():
    spec = {
        "files": [
            {
                "path": "/etc/token",
                "template": "{{ node.secrets.token }}",
                "secretRefs": [{"name": "s"}],
            }
        ]
    }
    contents = {"/etc/token": Rendered("CANARY-123", secret=True)}
    shown = tasks(plan_for(spec, contents=contents))[0]
    hidden = tasks(plan_for(spec, contents=contents, show_secrets=False))[0]
    assert shown["ansible.builtin.copy"]["content"] == "CANARY-123"
    assert shown["no_log"] is True and shown["diff"] is False
    assert shown["ansible.builtin.copy"]["mode"] == "0600"
    assert hidden["ansible.builtin.copy"]["content"] == REDACTED
    assert "CANARY-123" not in to_yaml(
        plan_for(spec, contents=contents, show_secrets=False).playbook
    )
    # For the agent, the next task reports whether it changed (ansible-runner censors no_log
    # results, `changed` too); it reads only that. `render` has no such task: ansible-playbook
    # itself shows whether a no_log task changed.
    plan = plan_for(spec, contents=contents)
    *_, task, report = plan.playbook[0]["tasks"][0]["block"]
    assert report["name"] == f"{shown['name']} | reported" == plan.steps[0].reported_by
    assert report["changed_when"] == f"{task['register']} is changed"
    assert "CANARY-123" not in str(report) and "no_log" not in report
    assert [s.task for s in plan.tasks()] == [shown["name"]]
    assert [t["name"] for t in leaves(plan.exported[0]["tasks"])] == [
        f"{shown['name']}: stat",
        f"{shown['name']}: not a directory",
        shown["name"],
    ]


def test_content_that_looks_like_tasks_stays_content():
    evil = "x\n- hosts: all\n  tasks:\n  - shell: rm -rf /\n{{ lookup('pipe', 'id') }}\n"
    plan = plan_for({"files": [{"path": "/a", "content": evil}]})
    for pretty in (False, True):
        text = to_yaml(plan.exported, pretty=pretty)
        loaded = yaml.safe_load(text.replace("!unsafe", ""))
        assert len(loaded) == 1 and len(loaded[0]["tasks"]) == 1
        assert loaded[0]["tasks"][0]["block"][-1]["ansible.builtin.copy"]["content"] == evil
        assert "!unsafe" in text  # Ansible will not template the Jinja in it


def test_render_is_deterministic():
    spec = {"packages": [{"name": "b"}, {"name": "a"}], "files": [{"path": "/a", "content": "ä\n"}]}
    assert to_yaml(plan_for(spec).playbook) == to_yaml(plan_for(spec).playbook)


def _digests(files):
    cs = ConfigSet.from_dict({"metadata": {"name": "d"}, "spec": {"files": files}})
    return build(merge([cs]), "debian", "n").resource_digests()


def test_resource_digests_follow_large_content_byte_for_byte():
    big = "ü" * 300_000
    base = _digests([{"path": "/big", "content": big}, {"path": "/small", "content": "s"}])
    assert base == _digests([{"path": "/big", "content": big}, {"path": "/small", "content": "s"}])
    changed = _digests(
        [{"path": "/big", "content": big[:-1] + "u"}, {"path": "/small", "content": "s"}]
    )
    assert changed["file:/big"] != base["file:/big"]
    assert changed["file:/small"] == base["file:/small"]
    moded = _digests(
        [{"path": "/big", "content": big, "mode": "0600"}, {"path": "/small", "content": "s"}]
    )
    assert moded["file:/big"] != base["file:/big"]


def test_paths_and_targets_keep_their_dollar_and_tilde():
    plan = plan_for(
        {
            "files": [
                {"path": "/srv/$USER", "ensure": "symlink", "target": "~/x"},
                {"path": "/srv/a", "ensure": "symlink", "target": "$HOME/${HOME}"},
                {"path": "/srv/b", "content": "b"},
            ]
        }
    )
    (link, plain) = tasks(plan)
    # Ansible expands path parameters in the module's environment: there each name is itself.
    assert link["environment"] == {"USER": "$USER", "HOME": "~"}
    assert "environment" not in plain
    assert plan.errors == {
        "file:/srv/a": "spec.files[1]: '$HOME' and '${HOME}' together: Ansible would expand "
        "one of them"
    }


def test_a_purged_entry_notifies_its_own_subscribers_never_the_directorys():
    """upstream handleFileSet appends each removed entry to changedFiles, not the directory."""
    plan = plan_for(
        {
            "files": [
                {"path": "/d", "ensure": "directory", "purge": True},
                {"path": "/d/kept", "content": "k"},
            ],
            "executions": [
                {"command": "/bin/a", "subscribe_files": ["/d"]},
                {"command": "/bin/b", "subscribe_files": ["/d/stray", "/d/kept", "/d/sub/x"]},
            ],
        }
    )
    purges = [t for t in tasks(plan) if "nodemanager.core.purge" in t]
    assert [p["nodemanager.core.purge"] for p in purges] == [
        {"path": "/d", "keep": ["/d/kept"], "only": ["/d/stray"]},
        {"path": "/d", "keep": ["/d/kept"]},
    ]
    assert purges[0]["notify"] == ["nodemanager changed /d/stray"]
    assert "notify" not in purges[1]
