"""The benchmark workloads: a 50-resource ConfigSet, written as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACKAGES = tuple(f"nmtest-pkg{i}" for i in range(10))


def fifty(
    root: Path, *, packages: bool = True, version: str = "v1", changed_file: int | None = None
) -> dict[str, Any]:
    """20 files, 10 directories, 10 executions subscribed to files, and 10 pacman packages (or,
    without packages, 10 more files): 50 resources."""
    files = [{"path": f"{root}/dir{d}", "ensure": "directory", "mode": "0755"} for d in range(10)]
    n_files = 20 if packages else 30
    for i in range(n_files):
        body = f"setting_{i} = {version if i == changed_file else 'v1'}\n" * 5
        files.append({"path": f"{root}/dir{i % 10}/file{i}.conf", "content": body, "mode": "0644"})
    executions = [
        {
            "command": "/bin/true",
            "args": [f"reload-{i}"],
            "subscribe_files": [f"{root}/dir{i % 10}/file{i}.conf"],
        }
        for i in range(10)
    ]
    spec: dict[str, Any] = {"selector": {}, "files": files, "executions": executions}
    if packages:
        spec["packages"] = [{"name": p} for p in PACKAGES]
    return {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "bench"},
        "spec": spec,
    }


FIRST_PACKAGES = tuple(f"nmtest-first{i}" for i in range(10))


def first(root: Path, *, files: bool = True, packages: bool = False) -> dict[str, Any]:
    """A first apply's ConfigSet: 100 resources (20 directories, 60 files, 20 executions
    subscribed to files) on a tree that does not exist yet, and/or 10 pacman packages in front
    (not installed yet)."""
    spec: dict[str, Any] = {"selector": {}}
    if files:
        halves = [fifty(root / half, packages=False)["spec"] for half in ("a", "b")]
        for i, half in enumerate(halves):  # distinct commands: no conflicts between the halves
            for e in half["executions"]:
                e["args"] = [*e["args"], f"half-{i}"]
        spec["files"] = [f for half in halves for f in half["files"]]
        spec["executions"] = [e for half in halves for e in half["executions"]]
    if packages:
        spec["packages"] = [{"name": p} for p in FIRST_PACKAGES]
    return {
        "apiVersion": "common.nodemanager/v1",
        "kind": "ConfigSet",
        "metadata": {"name": "first"},
        "spec": spec,
    }
