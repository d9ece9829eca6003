"""Run the real nodemanager CLI the way a user does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

NODEMANAGER = str(Path(sys.executable).with_name("nodemanager"))


def nm(
    *args: str, env: dict | None = None, prefix: list[str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(prefix or []), NODEMANAGER, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def write_configsets(path: Path, *configsets: dict) -> Path:
    docs = []
    for cs in configsets:
        docs.append(
            {
                "apiVersion": "common.nodemanager/v1",
                "kind": "ConfigSet",
                "metadata": {
                    "name": cs["name"],
                    "namespace": "nodemanager",
                    **({"labels": cs["labels"]} if "labels" in cs else {}),
                },
                "spec": cs["spec"],
            }
        )
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path
