"""Install the collections of requirements.yml into collections/ansible_collections.

ansible-galaxy is tried first; where its server cannot be reached (as on build machines that
only reach PyPI) the same collections are taken from the `ansible` community wheel on PyPI,
which bundles them. The wheel is cached under ~/.cache/nodemanager/ keyed by its version.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
TARGET = HERE / "ansible_collections"
# The community package whose wheel carries the collections
# (ansible 12 pairs with ansible-core 2.19).
ANSIBLE_WHEEL_VERSION = os.environ.get("NODEMANAGER_ANSIBLE_WHEEL", "12.3.0")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager" / "wheels"


def wanted() -> list[str]:
    data = yaml.safe_load((HERE / "requirements.yml").read_text())
    return [entry["name"] for entry in data["collections"]]


def installed(names: list[str]) -> bool:
    return all(
        (TARGET / Path(*name.split("."))).joinpath("MANIFEST.json").exists() for name in names
    )


def from_galaxy() -> bool:
    galaxy = shutil.which("ansible-galaxy") or str(Path(sys.executable).with_name("ansible-galaxy"))
    try:
        proc = subprocess.run(
            [
                galaxy,
                "collection",
                "install",
                "-r",
                str(HERE / "requirements.yml"),
                "-p",
                str(HERE),
                "--timeout",
                "15",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def cached_wheel() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"ansible-{ANSIBLE_WHEEL_VERSION}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            str(CACHE),
            f"ansible=={ANSIBLE_WHEEL_VERSION}",
        ],
        check=True,
    )
    return sorted(CACHE.glob(f"ansible-{ANSIBLE_WHEEL_VERSION}-*.whl"))[0]


def from_wheel(names: list[str]) -> None:
    wheel = cached_wheel()
    prefixes = tuple("ansible_collections/" + name.replace(".", "/") + "/" for name in names)
    with tempfile.TemporaryDirectory(dir=HERE) as tmp, zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith(prefixes):
                archive.extract(member, tmp)
        for name in names:
            namespace, collection = name.split(".")
            dest = TARGET / namespace / collection
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(tmp) / "ansible_collections" / namespace / collection, dest)


def main() -> int:
    names = wanted()
    if installed(names):
        return 0
    if not from_galaxy() or not installed(names):
        print(
            "ansible-galaxy could not install the collections; taking them from the ansible wheel",
            file=sys.stderr,
        )
        from_wheel(names)
    if not installed(names):
        print(f"collections missing after install: {names}", file=sys.stderr)
        return 1
    print(f"collections installed in {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
