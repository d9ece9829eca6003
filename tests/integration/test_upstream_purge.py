"""`purge` as upstream documents it: "Subdirectories are never removed, only plain files."

Undeclared entries directly in the directory that are not directories (files, symlinks) go;
subdirectories and everything in them stay. The fast path's probe and the
nodemanager.core.purge module must agree, so the same host goes through both.
"""

import os
from pathlib import Path

import pytest

from tests.integration.helpers import nm, write_configsets

pytestmark = pytest.mark.ansible


def populate(root: Path) -> None:
    (root / "conf.d" / "local.d").mkdir(parents=True)
    (root / "conf.d" / "local.d" / "mine.conf").write_text("admin's own\n")
    (root / "conf.d" / "stray.conf").write_text("not declared\n")
    os.symlink("/etc/hostname", root / "conf.d" / "stray-link")


@pytest.mark.parametrize("fast", ["--fast-path", "--no-fast-path"])
def test_purge_removes_plain_files_and_keeps_subdirectories(tmp_path, fast):
    root = tmp_path / "root"
    populate(root)
    spec = {
        "selector": {},
        "files": [
            {"path": f"{root}/conf.d", "ensure": "directory", "purge": True},
            {"path": f"{root}/conf.d/app.conf", "content": "declared\n"},
        ],
    }
    cfg = write_configsets(tmp_path / "cs.yaml", {"name": "purge", "spec": spec})

    first = nm("apply", "-f", str(cfg), fast)
    assert first.returncode == 0, first.stdout + first.stderr
    left = sorted(p.name for p in (root / "conf.d").iterdir())
    assert left == ["app.conf", "local.d"]
    assert (root / "conf.d" / "local.d" / "mine.conf").read_text() == "admin's own\n"

    # Converged: an undeclared subdirectory is not drift, for the probe and for the module.
    again = nm("apply", "-f", str(cfg), fast)
    assert again.returncode == 0 and "0 changed" in again.stdout, again.stdout + again.stderr
