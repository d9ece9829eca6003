"""`render --role` writes a role a team uses from its own playbook: a hand-written play includes
it with ansible.builtin.include_role and converges this host (local connection, a temporary
root), a second run changes nothing, and no Secret's value is in the role."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from nodemanager.cli import main
from nodemanager.executor import config
from nodemanager.playbook.role import FILES_ABOVE
from tests.integration.test_ansible_lint import ROOT, lint

pytestmark = [pytest.mark.ansible, pytest.mark.timeout(600)]

CANARY = "s3cret-canary-34"
BIG = "".join(f"line {i}\n" for i in range(FILES_ABOVE // 4))


def _configsets(root: Path) -> list[dict]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "app", "namespace": "nodemanager"},
            "stringData": {"password": CANARY},
        },
        {
            "apiVersion": "common.nodemanager/v1",
            "kind": "ConfigSet",
            "metadata": {"name": "site", "namespace": "nodemanager"},
            "spec": {
                "selector": {},
                "files": [
                    {"path": f"{root}/etc", "ensure": "directory", "mode": "0755"},
                    {"path": f"{root}/etc/app.conf", "content": "port = 80\n", "mode": "0644"},
                    {"path": f"{root}/etc/big.txt", "content": BIG},
                    {"path": f"{root}/etc/current", "ensure": "symlink", "target": "app.conf"},
                    {
                        "path": f"{root}/etc/secret.conf",
                        "template": "password={{ node.secrets.password }}\n",
                        "secretRefs": ["app"],
                    },
                ],
                "executions": [
                    {
                        "command": "/bin/sh",
                        "args": ["-c", f"echo reloaded >> {root}/reloads"],
                        "subscribe_files": [f"{root}/etc/app.conf"],
                    }
                ],
            },
        },
    ]


def _play(role_parent: Path, root: Path) -> list[dict]:
    """What a team writes: its own play, the role included, the Secret from its own vars."""
    return [
        {
            "name": "Converge the site",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "force_handlers": True,
            "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
            "tasks": [
                {
                    "name": "Apply what nodemanager renders",
                    "ansible.builtin.include_role": {"name": "nodemanager"},
                    "vars": {"nodemanager_content_" + _digest(root): f"password={CANARY}\n"},
                }
            ],
        }
    ]


def _digest(root: Path) -> str:
    from nodemanager.playbook.role import secret_var

    return secret_var(f"{root}/etc/secret.conf").removeprefix("nodemanager_content_")


def _run(workdir: Path, roles: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **config.envvars(workdir),
        "ANSIBLE_ROLES_PATH": str(roles),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
    }
    return subprocess.run(
        [f"{config.ansible_bin_dir()}/ansible-playbook", "-i", "localhost,", "site.yml"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )


def test_a_rendered_role_converges_a_host_from_a_team_playbook(tmp_path):
    root, roles, work = tmp_path / "root", tmp_path / "roles", tmp_path / "work"
    root.mkdir()
    work.mkdir()
    source = tmp_path / "site.yaml"
    source.write_text(yaml.safe_dump_all(_configsets(root)))
    result = CliRunner().invoke(
        main, ["render", "-f", str(source), "--os", "debian", "--role", str(roles / "nodemanager")]
    )
    assert result.exit_code == 0, result.output
    role = roles / "nodemanager"
    written = sorted(str(p.relative_to(role)) for p in role.rglob("*") if p.is_file())
    assert written == [
        "README.md",
        "files/0-big.txt",
        "handlers/main.yml",
        "meta/argument_specs.yml",
        "meta/main.yml",
        "tasks/main.yml",
    ]
    assert (role / "files" / "0-big.txt").read_text() == BIG
    assert "site" in (role / "README.md").read_text()
    assert not any(CANARY in p.read_text() for p in role.rglob("*") if p.is_file())
    assert lint([role], roles).returncode == 0

    (work / "site.yml").write_text(yaml.safe_dump(_play(roles, root), sort_keys=False))
    first = _run(work, roles)
    assert first.returncode == 0, first.stdout[-3000:]
    assert (root / "etc" / "app.conf").read_text() == "port = 80\n"
    assert (root / "etc" / "big.txt").read_text() == BIG
    assert os.readlink(root / "etc" / "current") == "app.conf"
    assert (root / "etc" / "secret.conf").read_text() == f"password={CANARY}\n"
    assert oct((root / "etc" / "secret.conf").stat().st_mode & 0o777) == "0o600"
    assert (root / "reloads").read_text() == "reloaded\n"  # the handler ran once
    assert CANARY not in first.stdout
    again = _run(work, roles)
    assert again.returncode == 0 and "changed=0" in again.stdout, again.stdout[-3000:]
    assert (root / "reloads").read_text() == "reloaded\n"
