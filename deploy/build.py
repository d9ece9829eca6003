"""`make build`: bin/nodemanager, one runnable file that carries its Python dependencies.

The file is a zipapp (PEP 441) holding nodemanager with every dependency (pip install --target),
the playbook skeletons and the Ansible collections. Compiled dependencies (PyYAML, MarkupSafe,
cryptography) cannot be imported from a zip, so on first start the payload is unpacked once,
atomically, into a directory keyed by the payload's hash; later starts only check that it is
there. ansible-runner starts `ansible-playbook` as a process: the unpacked tree has a small
`bin/ansible-playbook` written for the interpreter that runs the zipapp.

Usage: python deploy/build.py OUT  (the host needs CPython of the same minor version and
platform as the build machine).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipapp
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The zipapp's entry point. It must only use the standard library: nothing else is importable
# before the payload is unpacked.
BOOT = r"""
import os, sys, tempfile, zipfile
from pathlib import Path

PAYLOAD_HASH = {payload_hash!r}


def _cache_root():
    explicit = os.environ.get("NODEMANAGER_UNPACK_DIR")
    if explicit:
        return Path(explicit)
    if os.geteuid() == 0:
        return Path("/var/cache/nodemanager")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nodemanager"


def _unpack():
    target = _cache_root() / ("app-" + PAYLOAD_HASH[:16])
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=target.parent))
    with zipfile.ZipFile(os.path.dirname(__file__)) as archive:
        for member in archive.namelist():
            if member.startswith("payload/"):
                archive.extract(member, staging)
    shim = staging / "payload" / "bin" / "ansible-playbook"
    shim.parent.mkdir()
    shim.write_text(
        "#!"
        + sys.executable
        + "\nimport sys\nsys.path.insert(0, "
        + repr(str(target / "site"))
        + ")\n"
        "from ansible.cli.playbook import main\nsys.exit(main())\n")
    shim.chmod(0o755)
    (staging / "payload" / ".complete").touch()
    try:
        os.rename(staging / "payload", target)  # atomic: a concurrent start sees all or nothing
    except OSError:
        if not (target / ".complete").exists():
            raise
    finally:
        import shutil
        shutil.rmtree(staging, ignore_errors=True)
    return target


app = _unpack()
sys.path.insert(0, str(app / "site"))
os.environ.setdefault("NODEMANAGER_COLLECTIONS_PATH", str(app / "collections"))
os.environ.setdefault("NODEMANAGER_PLAYBOOK_TEMPLATES", str(app / "playbook_templates"))
os.environ.setdefault("NODEMANAGER_ANSIBLE_BIN", str(app / "bin"))
from nodemanager.cli import main
sys.exit(main())
"""


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build(out: Path) -> None:
    collections = ROOT / "collections" / "ansible_collections"
    if not (collections / "community" / "general").is_dir():
        raise SystemExit("collections are not installed: run `make collections` first")
    with tempfile.TemporaryDirectory(prefix="nodemanager-build-") as tmp:
        app = Path(tmp) / "app"
        payload = app / "payload"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--target",
                str(payload / "site"),
                str(ROOT),
            ],
            check=True,
        )
        shutil.rmtree(
            payload / "site" / "bin", ignore_errors=True
        )  # console scripts point at this interpreter
        shutil.copytree(
            collections,
            payload / "collections" / "ansible_collections",
            ignore=shutil.ignore_patterns("__pycache__", "tests", "docs"),
        )
        shutil.copytree(ROOT / "playbook_templates", payload / "playbook_templates")
        (app / "__main__.py").write_text(BOOT.format(payload_hash=tree_hash(payload)))
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        zipapp.create_archive(app, partial, interpreter="/usr/bin/env python3", compressed=True)
        partial.chmod(0o755)
        partial.rename(out)
    print(f"built {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bin" / "nodemanager")
