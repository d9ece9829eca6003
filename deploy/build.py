"""`make build`: bin/nodemanager, one runnable file that carries its Python dependencies.

The file is a zipapp (PEP 441) holding nodemanager with every dependency (pip install --target),
the playbook skeletons and the Ansible collections. Compiled dependencies (PyYAML, MarkupSafe,
cryptography) cannot be imported from a zip, so on first start the payload is unpacked once,
atomically, into a directory keyed by the payload's hash; later starts only check that it is
there. ansible-runner starts `ansible-playbook` as a process: the unpacked tree has a small
`bin/ansible-playbook` written for the interpreter that runs the zipapp.

One file runs on every CPython in PYTHONS (the minors ansible-core 2.19 supports): pure-Python
packages sit once in `site/`; each distribution with a version-specific extension module
(`*.cpython-311-*.so`: PyYAML, MarkupSafe, cffi, charset-normalizer) is carried per minor in
`site-cp3XX/`, the same release fetched as a binary wheel for that minor. Stable-ABI (abi3)
modules such as cryptography's serve every minor from `site/`. On another interpreter the file
says in one line what it needs and exits 2.

Usage: python deploy/build.py OUT  (the host needs the build machine's platform).
"""

from __future__ import annotations

import hashlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipapp
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nodemanager.version import stamp  # noqa: E402  (the checkout's, standard library only)

# The zipapp's entry point. It must only use the standard library: nothing else is importable
# before the payload is unpacked.
BOOT = r"""
import os, sys, tempfile, zipfile
from pathlib import Path

PAYLOAD_HASH = {payload_hash!r}
PYTHONS = {pythons!r}

if sys.implementation.name != "cpython" or sys.version_info[:2] not in PYTHONS:
    sys.stderr.write(
        "nodemanager: needs CPython "
        + ", ".join("%d.%d" % v for v in PYTHONS)
        + "; this is %s %d.%d (%s)\n"
        % ((sys.implementation.name,) + sys.version_info[:2] + (sys.executable,))
    )
    sys.exit(2)
SITES = ["site-cp%d%d" % sys.version_info[:2], "site"]


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
        + "\nimport sys\nsys.path[:0] = "
        + repr([str(target / site) for site in SITES])
        + "\n"
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
sys.path[:0] = [str(app / site) for site in SITES]
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


# The CPython minors one file serves (ansible-core 2.19: 3.11 to 3.13).
PYTHONS = ((3, 11), (3, 12), (3, 13))
RECORD_SO = re.compile(r"^([^,]+\.cpython-3\d+[^,/]*\.so),")


def version_specific(site: Path) -> dict[str, list[str]]:
    """`name==version` of each distribution in site with a version-specific extension module,
    with the files its RECORD lists (relative to site)."""
    found: dict[str, list[str]] = {}
    for record in site.glob("*.dist-info/RECORD"):
        lines = record.read_text().splitlines()
        if any(RECORD_SO.match(line) for line in lines):
            name, version = record.parent.name[: -len(".dist-info")].rsplit("-", 1)
            found[f"{name}=={version}"] = [line.rsplit(",", 2)[0] for line in lines if line]
    return found


def linux_platforms() -> list[str]:
    """pip --platform tags for this machine's architecture (glibc manylinux)."""
    arch = platform.machine()
    return [f"manylinux_2_{minor}_{arch}" for minor in range(17, 40)] + [f"manylinux2014_{arch}"]


def split_per_python(payload: Path) -> None:
    """Move version-specific distributions from site/ into site-cp3XX/, one per minor."""
    site = payload / "site"
    specific = version_specific(site)
    own = f"site-cp{sys.version_info[0]}{sys.version_info[1]}"
    for files in specific.values():
        for rel in files:
            source = site / rel
            if source.exists():
                (payload / own / rel).parent.mkdir(parents=True, exist_ok=True)
                source.rename(payload / own / rel)
    for major, minor in PYTHONS:
        if (major, minor) == sys.version_info[:2] or not specific:
            continue
        platforms = [arg for tag in linux_platforms() for arg in ("--platform", tag)]
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps"]
            + ["--only-binary=:all:", "--implementation", "cp"]
            + ["--python-version", f"{major}.{minor}", *platforms]
            + ["--target", str(payload / f"site-cp{major}{minor}"), *sorted(specific)],
            check=True,
        )


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
        info = stamp(payload / "site" / "nodemanager", ROOT)
        split_per_python(payload)
        shutil.copytree(
            collections,
            payload / "collections" / "ansible_collections",
            ignore=shutil.ignore_patterns("__pycache__", "tests", "docs"),
        )
        shutil.copytree(ROOT / "playbook_templates", payload / "playbook_templates")
        (app / "__main__.py").write_text(
            BOOT.format(payload_hash=tree_hash(payload), pythons=PYTHONS)
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        zipapp.create_archive(app, partial, interpreter="/usr/bin/env python3", compressed=True)
        partial.chmod(0o755)
        partial.rename(out)
    print(f"built {out} ({out.stat().st_size / 1e6:.1f} MB): {info.line()}")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bin" / "nodemanager")
