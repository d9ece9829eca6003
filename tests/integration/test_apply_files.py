"""`nodemanager apply` on this host: real ansible-runner, local connection, real files."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.integration.helpers import NODEMANAGER, nm, write_configsets

pytestmark = pytest.mark.ansible
ALL = {}  # an empty selector matches every node


def files_spec(root: Path) -> dict:
    return {
        "selector": ALL,
        "files": [
            {"path": f"{root}/etc", "ensure": "directory", "mode": "0750", "purge": True},
            {
                "path": f"{root}/etc/app.conf",
                "content": "port = 80\n",
                "mode": "0640",
                "owner": "root",
                "group": "root",
            },
            {"path": f"{root}/etc/empty", "createOnly": True},  # opt-in: made empty
            {"path": f"{root}/etc/absent-empty"},  # no content: left alone (upstream)
            {"path": f"{root}/etc/current", "ensure": "symlink", "target": f"{root}/etc/app.conf"},
            {"path": f"{root}/etc/keep-local", "content": "default\n", "createOnly": True},
            {"path": f"{root}/old.conf", "ensure": "absent"},
            {"path": f"{root}/etc/emptied", "content": ""},
        ],
    }


def test_every_file_form_applies_and_reapply_changes_nothing(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "stray").write_text("not declared\n")
    (root / "etc" / "keep-local").write_text("edited by hand\n")
    (root / "old.conf").write_text("remove me\n")
    (root / "etc" / "emptied").write_text("to be emptied\n")
    cfg = write_configsets(tmp_path / "cs.yaml", {"name": "files", "spec": files_spec(root)})

    first = nm("apply", "-f", str(cfg))
    assert first.returncode == 0, first.stdout + first.stderr
    assert "files: " in first.stdout and "0 failed" in first.stdout
    assert stat.S_IMODE((root / "etc").stat().st_mode) == 0o750
    assert (root / "etc" / "app.conf").read_text() == "port = 80\n"
    assert stat.S_IMODE((root / "etc" / "app.conf").stat().st_mode) == 0o640
    assert (root / "etc" / "empty").is_file() and (root / "etc" / "empty").read_text() == ""
    assert os.readlink(root / "etc" / "current") == f"{root}/etc/app.conf"
    assert (root / "etc" / "keep-local").read_text() == "edited by hand\n"  # createOnly
    assert not (root / "old.conf").exists()
    assert not (root / "etc" / "stray").exists()  # purge
    # No content ("" included) is no write, as upstream: nothing created, nothing emptied.
    assert (root / "etc" / "emptied").read_text() == "to be emptied\n"
    assert not (root / "etc" / "absent-empty").exists()

    second = nm("apply", "-f", str(cfg))
    assert second.returncode == 0, second.stdout + second.stderr
    # 6: the two files without content have no task (as upstream)
    assert "0 changed" in second.stdout and "6 ok" in second.stdout, second.stdout


def test_purge_and_ownerless_files_notify_as_upstream(tmp_path):
    """upstream handleFileSet: a purge counts each removed entry as changed (its subscribers
    run), never the directory; a written file is chowned to root:root when no owner is named
    (files.New(..., "root", "root")), and a changed owner runs its subscribers."""
    d, log = tmp_path / "d", tmp_path / "ran.log"
    d.mkdir()
    (d / "stray").write_text("s")
    conf = tmp_path / "app.conf"
    conf.write_text("v1\n")
    os.chown(conf, 65534, 65534)  # nobody: content right, owner not
    spec = {
        "selector": ALL,
        "files": [
            {"path": str(d), "ensure": "directory", "purge": True},
            {"path": str(conf), "content": "v1\n"},
        ],
        "executions": [
            {"command": "/bin/sh", "args": ["-c", f"echo {n} >> {log}"], "subscribe_files": [p]}
            for n, p in (("dir", str(d)), ("conf", str(conf)), ("stray", str(d / "stray")))
        ],
    }
    cfg = write_configsets(tmp_path / "cs.yaml", {"name": "up", "spec": spec})
    done = nm("apply", "-f", str(cfg))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (d / "stray").exists()
    assert (conf.stat().st_uid, conf.stat().st_gid) == (0, 0)
    # the owner reset ran conf's; the purge ran the removed entry's, not the directory's
    assert sorted(log.read_text().split()) == ["conf", "stray"]


def test_subscribed_execution_runs_only_when_its_file_changed(tmp_path):
    log = tmp_path / "ran.log"

    def apply(content):
        cfg = write_configsets(
            tmp_path / "cs.yaml",
            {
                "name": "exec",
                "spec": {
                    "selector": ALL,
                    "files": [
                        {"path": f"{tmp_path}/app.conf", "content": content},
                        {"path": f"{tmp_path}/other", "content": "x"},
                    ],
                    "executions": [
                        {
                            "command": "/bin/sh",
                            "args": ["-c", f"echo ran >> {log}"],
                            "subscribe_files": [f"{tmp_path}/app.conf"],
                        }
                    ],
                },
            },
        )
        result = nm("apply", "-f", str(cfg))
        assert result.returncode == 0, result.stdout + result.stderr
        return log.read_text().count("ran") if log.exists() else 0

    assert apply("v1\n") == 1
    assert apply("v1\n") == 1  # nothing changed: the execution does not run
    assert apply("v2\n") == 2


def test_failure_is_reported_with_its_message_and_the_rest_applies(tmp_path):
    (tmp_path / "blocker").write_text("a file where a directory should be\n")
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "broken",
            "spec": {
                "selector": ALL,
                "files": [{"path": f"{tmp_path}/blocker/x.conf", "content": "x"}],
            },
        },
        {
            "name": "fine",
            "spec": {
                "selector": ALL,
                "files": [{"path": f"{tmp_path}/fine.conf", "content": "ok"}],
            },
        },
    )
    result = nm("apply", "-f", str(cfg))
    assert result.returncode == 1
    assert f"failed file:{tmp_path}/blocker/x.conf:" in result.stdout
    assert "broken: 0 ok, 0 changed, 1 failed" in result.stdout
    assert "fine: 0 ok, 1 changed, 0 failed" in result.stdout
    assert (tmp_path / "fine.conf").read_text() == "ok"


def test_invalid_configset_names_the_field_and_never_becomes_a_task(tmp_path):
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "bad",
            "spec": {
                "selector": ALL,
                "files": [
                    {"path": f"{tmp_path}/ok-but-skipped", "content": "x"},
                    {"path": "relative/x"},
                    {"path": f"{tmp_path}/m", "mode": "999"},
                ],
            },
        },
        {
            "name": "good",
            "spec": {"selector": ALL, "files": [{"path": f"{tmp_path}/good", "content": "g"}]},
        },
    )
    result = nm("apply", "-f", str(cfg))
    assert result.returncode == 1
    assert "spec.files[1].path: 'relative/x' must be an absolute path" in result.stderr
    assert "spec.files[2].mode: '999' is not an octal string" in result.stderr
    assert not (tmp_path / "ok-but-skipped").exists()  # a bad ConfigSet applies nothing
    assert (tmp_path / "good").read_text() == "g"


def test_content_that_looks_like_tasks_is_written_verbatim(tmp_path):
    evil = (
        f"- hosts: all\n  tasks:\n    - shell: touch {tmp_path}/pwned\n"
        f"{{{{ lookup('pipe', 'touch {tmp_path}/pwned2') }}}}\n"
    )
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "evil",
            "spec": {"selector": ALL, "files": [{"path": f"{tmp_path}/payload", "content": evil}]},
        },
    )
    result = nm("apply", "-f", str(cfg))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "payload").read_text() == evil
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()


def test_check_mode_reports_and_changes_nothing(tmp_path):
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "dry",
            "spec": {"selector": ALL, "files": [{"path": f"{tmp_path}/new.conf", "content": "x"}]},
        },
    )
    result = nm("apply", "--check", "-f", str(cfg))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "dry: 0 ok, 1 would change, 0 failed" in result.stdout
    assert not (tmp_path / "new.conf").exists()


def test_diff_shows_the_file_change(tmp_path):
    (tmp_path / "a.conf").write_text("old line\n")
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "d",
            "spec": {
                "selector": ALL,
                "files": [{"path": f"{tmp_path}/a.conf", "content": "new line\n"}],
            },
        },
    )
    result = nm("apply", "--diff", "-f", str(cfg))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-old line" in result.stderr and "+new line" in result.stderr


def test_private_run_directory_is_removed(tmp_path):
    work = tmp_path / "tmp"
    work.mkdir()
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "t",
            "spec": {"selector": ALL, "files": [{"path": f"{tmp_path}/f", "content": "x"}]},
        },
    )
    result = nm("apply", "-f", str(cfg), env={"TMPDIR": str(work)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert list(work.iterdir()) == []


def test_missing_collection_is_a_clear_error(tmp_path):
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {"name": "p", "spec": {"selector": ALL, "packages": [{"name": "vim"}]}},
    )
    result = nm(
        "apply",
        "--os",
        "arch",
        "-f",
        str(cfg),
        env={"NODEMANAGER_COLLECTIONS_PATH": str(tmp_path / "none")},
    )
    assert result.returncode == 1
    assert "Ansible modules not installed: community.general.pacman" in result.stderr


def test_rendered_playbook_runs_as_is_with_ansible_playbook(tmp_path):
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "r",
            "spec": {
                "selector": ALL,
                "files": [
                    {"path": f"{tmp_path}/rendered.conf", "content": "{{ not templated }}\n"}
                ],
                "executions": [
                    {
                        "command": "/bin/sh",
                        "args": ["-c", f"pwd > {tmp_path}/handler-cwd"],
                        "subscribe_files": [f"{tmp_path}/rendered.conf"],
                    }
                ],
            },
        },
    )
    first, second = nm("render", "-f", str(cfg)), nm("render", "-f", str(cfg))
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout  # same input, same bytes
    playbook = tmp_path / "site.yml"
    playbook.write_text(first.stdout)
    collections = Path(__file__).resolve().parents[2] / "collections"
    run = subprocess.run(
        [str(Path(NODEMANAGER).with_name("ansible-playbook")), str(playbook)],
        capture_output=True,
        text=True,
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(collections)},
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "rendered.conf").read_text() == "{{ not templated }}\n"
    assert (
        tmp_path / "handler-cwd"
    ).read_text() == "/\n"  # the handler ran, from / as the fast path runs it


def test_template_that_breaks_the_parser_fails_alone_and_the_rest_applies(tmp_path):
    """70 nested parentheses (147 bytes) raised RecursionError in the command itself, which
    wrote neither file (issue 37): now it is that file's error and the plain one applies."""
    nested = "{{ " + "(" * 70 + "1" + ")" * 70 + " }}"
    cfg = write_configsets(
        tmp_path / "cs.yaml",
        {
            "name": "bad",
            "spec": {"selector": ALL, "files": [{"path": f"{tmp_path}/bad", "template": nested}]},
        },
        {
            "name": "plain",
            "spec": {"selector": ALL, "files": [{"path": f"{tmp_path}/plain", "content": "p"}]},
        },
    )
    result = nm("apply", "-f", str(cfg))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "spec.files[0].template" in result.stdout + result.stderr
    assert "RecursionError" in result.stdout + result.stderr
    assert (tmp_path / "plain").read_text() == "p"
    assert not (tmp_path / "bad").exists()
